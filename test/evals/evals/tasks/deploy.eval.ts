import { defineEval } from "eve/evals";
import { includes } from "eve/evals/expect";

// deploy is a task (tools.AsTask): its call answers with eve's receipt at
// once, the model says it started and waits (eve__task_wait), and the
// task's result reaches it in the same turn, which ends only after that.
export default defineEval({
  description: "A task: the receipt, a wait, and the result in the same turn.",
  async test(t) {
    const turn = await t.send("deploy web");
    t.succeeded();
    t.calledTool("deploy", { input: { service: "web" }, count: 1 });
    t.calledTool("eve__task_wait", { count: 1 });
    t.event("task.started", { data: { name: "deploy", kind: "tool" }, count: 1 });
    t.event("task.settled", { data: { name: "deploy", status: "completed" }, count: 1 });
    t.event("turn.waiting", { data: { on: "tasks" } });
    t.noFailedActions();
    t.check(turn.message, includes("web is live at"));
  },
});
