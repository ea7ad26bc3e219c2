import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

// refund_charge is not idempotent: its real body refunds (and answers
// {refunded: <amount>, requestedBy, idempotencyKey}). Stubbed, the
// approval is still asked, and the approved call settles with the stub's
// response: had the real body run, the output and the reply checks fail.
export default defineEval({
  description: "A stubbed non-idempotent tool: approval still asked, the real body never runs.",
  async test(t) {
    const session = await t.session({
      stubs: [
        {
          id: "refund-sequence",
          tool: "refund_charge",
          outcomes: [
            { response: { refunded: 0, chargeId: "ch_stub", stubbed: true } },
            { throw: { message: "payment provider down (stubbed)" } },
          ],
        },
      ],
    });
    const parked = await session.send("refund ch_9 for 9");
    const request = parked.session.requireInputRequest({ toolName: "refund_charge" });
    const first = await parked.session.respond([{ requestId: request.requestId, optionId: "approve" }]);
    first.calledTool("refund_charge", { output: { refunded: 0, stubbed: true }, count: 1 });
    t.eventsSatisfy("no refund_charge result came from the real body (it answers requestedBy)", (events) =>
      events.every(
        (e) => e.type !== "action.result" || !JSON.stringify(e.data.result.output ?? null).includes("requestedBy"),
      ),
    );
    t.check(first.message, includes("Refund of ch_9: 0"));

    const parked2 = await session.send("refund ch_10 for 10");
    const request2 = parked2.session.requireInputRequest({ toolName: "refund_charge" });
    const second = await parked2.session.respond([{ requestId: request2.requestId, optionId: "approve" }]);
    second.calledTool("refund_charge", { status: "failed", count: 1 });
    t.check(second.message, includes("payment provider down (stubbed)"));
    t.event("action.result", { data: { stub: { ruleId: "refund-sequence" } }, count: 2 });
  },
});
