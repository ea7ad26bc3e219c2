import { defineEvalConfig } from "eve/evals";

// eve's eval runner against this runtime (test/evals/run.mjs): no judge,
// no reporters beyond the CLI's console and JUnit.
export default defineEvalConfig({
  timeoutMs: 60_000,
});
