import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

export default defineEval({
  description: "A denied refund does not run; its result has eve's shape and the model reads why.",
  async test(t) {
    const parked = await t.send("refund ch_7 50");
    const request = parked.session.requireInputRequest({ toolName: "refund_charge" });
    const turn = await parked.session.respond([
      { requestId: request.requestId, optionId: "cancel", text: "refunds need a ticket" },
    ]);
    turn.expectOk();
    t.calledTool("refund_charge", {
      status: "rejected",
      output: {
        approval: { requestId: request.requestId, status: "denied" },
        code: "TOOL_EXECUTION_DENIED",
        message: /refunds need a ticket/,
        tool: { result: "not_run" },
      },
      count: 1,
    });
    t.notCalledTool("get_weather");
    t.check(turn.message, includes("denied by the user: refunds need a ticket"));
    t.succeeded();
  },
});
