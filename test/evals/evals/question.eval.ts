import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

export default defineEval({
  description: "A client tool asks the user a question; the answer is its result.",
  async test(t) {
    const parked = await t.send("choose a plan");
    parked.parked();
    const request = parked.session.requireInputRequest({ toolName: "choose_plan", optionIds: ["basic", "pro"] });
    const turn = await parked.session.respond([{ requestId: request.requestId, optionId: "pro" }]);
    turn.expectOk();
    t.check(turn.message, includes("You picked pro."));
    t.succeeded();
  },
});
