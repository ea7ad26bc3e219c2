import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

export default defineEval({
  description: "refund_charge asks a person first; approved, it runs.",
  async test(t) {
    const parked = await t.send("refund ch_42 for 25");
    parked.parked();
    parked.calledTool("refund_charge", { status: "pending", count: 1 });
    const request = parked.session.requireInputRequest({
      toolName: "refund_charge",
      prompt: "Refund $25.00 for charge ch_42?",
      optionIds: ["approve", "cancel"],
    });
    const turn = await parked.session.respond([{ requestId: request.requestId, optionId: "approve" }]);
    turn.expectOk();
    t.calledTool("refund_charge", { input: { chargeId: "ch_42", amount: 25 }, output: { refunded: 25, chargeId: "ch_42" }, count: 1 });
    t.check(turn.message, includes("Refund of ch_42: 25"));
    t.succeeded();
  },
});
