import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

// run_report is a delegated tool: for real it spools a job for an external
// runner, which `eve dev` does not run, so the turn would wait on its task
// past this eval's timeout. Stubbed, it starts no job.
export default defineEval({
  description: "A delegated job with a stubbed outcome: no task starts, the model reads the stub.",
  async test(t) {
    const session = await t.session({
      stubs: [
        {
          id: "sales-report",
          tool: "run_report",
          match: { name: { const: "sales" } },
          outcome: { response: { status: "succeeded", detail: "stubbed: 42 rows" } },
        },
      ],
    });
    const turn = await session.send("run the sales report");
    turn.expectOk();
    t.calledTool("run_report", { input: { name: "sales" }, output: { detail: "stubbed: 42 rows" }, count: 1 });
    t.notEvent("task.started");
    t.event("action.result", { data: { stub: { ruleId: "sales-report", position: 0 } }, count: 1 });
    t.check(turn.message, includes("The sales report succeeded: stubbed: 42 rows"));
    t.succeeded();
  },
});
