import { defineEval } from "eve/evals";
import { equals, includes } from "eve/evals/expect";

export default defineEval({
  description: "Two turns in one session, in order.",
  async test(t) {
    const first = await t.send("what's the weather in Oslo");
    const second = await first.session.send("compare Paris and Rome");
    await t.require(second.sessionId, equals(first.sessionId));
    t.check(second.message, includes("Paris:"));
    t.toolOrder(["get_weather", "get_weather", "get_weather"]);
    t.calledTool("get_weather", { count: 3 });
    t.succeeded();
  },
});
