import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

export default defineEval({
  description: "A tool call and a reply: the demo's get_weather, for real.",
  async test(t) {
    const turn = await t.send("what's the weather in Paris");
    t.succeeded();
    t.calledTool("get_weather", { input: { city: "Paris" }, output: { city: "Paris" }, count: 1 });
    t.noFailedActions();
    t.check(turn.message, includes("in Paris."));
  },
});
