package workflows

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
)

// endCall: a subagent task serving a call and the calls that joined it
// stays working until the last of them settles, whichever settles first.
func TestEndCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int // the calls that settle, in order: 0 the current, 1.. the joined
		want  []string
	}{
		{name: "current first", order: []int{0, 1, 2}, want: []string{"working c1", "working c2", "idle -"}},
		{name: "joined first", order: []int{2, 1, 0}, want: []string{"working c0", "working c0", "idle -"}},
		{name: "mixed", order: []int{1, 0, 2}, want: []string{"working c0", "working c2", "idle -"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]*taskCall, 3)
			for i := range calls {
				calls[i] = &taskCall{c: pendingCall{plan: work.CallPlan{Call: model.ToolCall{ID: fmt.Sprintf("c%d", i)}}}}
			}
			tr := &turn{}
			ts := &taskState{TaskInfo: protocol.TaskInfo{Kind: taskKindAgent}, resumable: true}
			tr.beginCall(ts, calls[0])
			ts.joined = []*taskCall{calls[1], calls[2]}
			var got []string
			for _, i := range tc.order {
				tr.endCall(ts, calls[i], protocol.TaskCompleted)
				cur := "-"
				if ts.current != nil {
					cur = ts.current.c.plan.Call.ID
				}
				got = append(got, ts.Status+" "+cur)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status and current call after each settles (-want +got):\n%s", diff)
			}
		})
	}
}
