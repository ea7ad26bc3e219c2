import { defineEval } from "eve/evals";
import { loadJson } from "eve/evals/loaders";

// A recorded demo session (`eve session export-stubs`, docs/evals.md:
// weather, a refund approved, a plan chosen, a credit the tenant policy
// denies), replayed by eve's runner: a session with the recording's stubs
// (no tool it saw run runs again), its messages sent and its answers given
// in order, and the same calls asserted, in order, with the same inputs.
type Recording = {
  stubs: { outcome?: unknown; outcomes?: unknown[] }[];
  steps: { message?: string; respond?: { toolName: string; optionId?: string; text?: string }[] }[];
  calls: { tool: string; input: unknown; status: string }[];
};

const recording = (await loadJson("evals/data/recorded-demo.json")) as Recording;

export default defineEval({
  description: "A recorded session replays with its stubs: the same tools, in the same order, with the same inputs.",
  async test(t) {
    const session = await t.session({ stubs: recording.stubs as never });
    for (const step of recording.steps) {
      if (step.message !== undefined) {
        await session.send(step.message);
        continue;
      }
      const responses = (step.respond ?? []).map((r) => {
        const request = session.requireInputRequest({ toolName: r.toolName });
        return { requestId: request.requestId, optionId: r.optionId, text: r.text };
      });
      await session.respond(responses);
    }
    t.toolOrder(recording.calls.map((c) => c.tool));
    for (const call of recording.calls) {
      t.calledTool(call.tool, { input: call.input as never, status: call.status as never, count: 1 });
    }
    // Every call the recording saw run was settled by its stub.
    const recorded = recording.stubs.reduce((n, r) => n + (r.outcomes?.length ?? 1), 0);
    t.eventsSatisfy(`${recorded} calls settled by the recording's stubs`, (events) =>
      events.filter((e) => e.type === "action.result" && (e.data as { stub?: unknown }).stub !== undefined).length === recorded,
    );
    t.succeeded();
  },
});
