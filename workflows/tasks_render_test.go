package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The model-facing texts are eve 0.80's (dist/src/execution/tasks/render.js).
func TestTaskTexts(t *testing.T) {
	long := strings.Repeat("x", taskResultBytes)
	lines := strings.Repeat("l\n", taskResultLines+5)
	for _, tc := range []struct {
		name, got, want string
	}{
		{"result", renderTaskResults([]taskResult{{id: "deploy-4hd8sa", tool: "deploy", status: "completed", body: `{"url":"https://…"}`}}),
			`<task_result id="deploy-4hd8sa" tool="deploy" status="completed">{"url":"https://…"}</task_result>`},
		{"escaped", renderTaskResults([]taskResult{{id: "a-1", tool: `t"`, status: "failed", body: "no </task_result> here"}}),
			`<task_result id="a-1" tool="t&quot;" status="failed">no <\/task_result> here</task_result>`},
		{"bytes", renderTaskResults([]taskResult{{id: "a", tool: "t", status: "completed", body: "ok\n" + long}, {id: "b", tool: "t", status: "completed", body: "gone"}}),
			"<task_result id=\"a\" tool=\"t\" status=\"completed\">ok\n[truncated]</task_result>\n<task_result id=\"b\" tool=\"t\" status=\"completed\">[truncated]</task_result>"},
		{"lines", linesCut(lines), "true"},
		{"wait settled", settledWaitText([]taskResult{{id: "deploy-4hd8sa", status: "completed"}}, []string{"researcher-7k2m9q"}),
			"deploy-4hd8sa completed; its result follows. 1 task is still working: researcher-7k2m9q."},
		{"wait two", settledWaitText([]taskResult{{id: "a", status: "completed"}, {id: "b", status: "failed"}, {id: "c", status: "completed"}}, nil),
			"a completed, b failed and c completed; their results follow."},
		{"wait none", settledWaitText(nil, nil), "No tasks are working."},
		{"duration", formatDuration(65*time.Second) + " " + formatDuration(850*time.Millisecond) + " " + formatDuration(2*time.Hour+time.Second), "1m 5s 850ms 2h 1s"},
		{"id", taskID("s1", "turn_0", "call_1", "deploy", 0), taskID("s1", "turn_0", "call_1", "deploy", 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if a, b := taskID("s1", "turn_0", "call_1", "deploy", 0), taskID("s2", "turn_0", "call_1", "deploy", 0); a == b {
		t.Errorf("two sessions, one task id %s", a)
	}
}

// linesCut: a body of more than 2,000 lines keeps 2,000 and is marked.
func linesCut(body string) string {
	r := renderTaskResults([]taskResult{{id: "a", tool: "t", status: "completed", body: body}})
	if strings.Count(r, "\n") == taskResultLines && strings.HasSuffix(r, "[truncated]</task_result>") {
		return "true"
	}
	return r
}
