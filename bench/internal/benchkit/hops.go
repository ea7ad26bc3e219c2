package benchkit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/signals"
)

// Hops is what some workflows cost in Temporal, read from their histories:
// history events, workflow tasks and Temporal Cloud billable actions.
//
// Billable actions, per https://docs.temporal.io/cloud/actions, as far as a
// history shows them:
//   - workflow started (client start, Update-with-Start, child, continue-as-new): 1
//   - activity task started: 1 per attempt
//   - local activities: 1 per workflow task that ran any (their markers)
//   - side effect recorded: 1; version markers (GetVersion): 0
//   - search-attribute upsert: 1 per command, unless it sets only TemporalChangeVersion
//   - timer started: 1; signal received: 1 (counted once, at the receiver)
//   - update accepted: 1 (rejected updates leave no event and are not counted)
//
// Queries leave no history and are not counted here, though on Temporal
// Cloud every query a worker answers is an action as well.
type Hops struct {
	Workflows, Events, Tasks, Actions int
	// ByType counts billable actions by kind ("activity", "signal", ...).
	ByType map[string]int
	// Signals counts signals received, by signal name.
	Signals map[string]int
}

// CountHops reads the histories of the workflows named by ids, of their
// child workflows and of eve sessions' turns, and adds them up. each, if
// not nil, sees every event. A session starts its turns from a local
// activity (no child event names them), so a session's turns are found by
// their ids, <session>/turn_<n> from 0, until one does not exist (so are
// the raw SDK's sessions, bench/rawsdk/shapes.go).
func CountHops(ctx context.Context, c client.Client, ids []string, each func(workflowID string, e *historypb.HistoryEvent)) (Hops, error) {
	h := Hops{ByType: map[string]int{}, Signals: map[string]int{}}
	seen := map[string]bool{}
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		h.Workflows++
		it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		laTasks := map[int64]bool{}
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return h, fmt.Errorf("history of %s: %w", id, err)
			}
			h.Events++
			if each != nil {
				each(id, e)
			}
			add := func(kind string, n int) { h.ByType[kind] += n; h.Actions += n }
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				h.Tasks++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				add("start", 1)
				if strings.HasSuffix(e.GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName(), ".Session") {
					turns, err := sessionTurns(ctx, c, id)
					if err != nil {
						return h, err
					}
					ids = append(ids, turns...)
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				add("activity", int(max(e.GetActivityTaskStartedEventAttributes().GetAttempt(), 1)))
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				a := e.GetMarkerRecordedEventAttributes()
				switch a.GetMarkerName() {
				case "LocalActivity":
					if wt := a.GetWorkflowTaskCompletedEventId(); !laTasks[wt] {
						laTasks[wt] = true
						add("local-activity", 1)
					}
				case "SideEffect", "MutableSideEffect":
					add("side-effect", 1)
				}
			case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
				if onlyChangeVersion(e) {
					continue
				}
				add("upsert", 1)
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				add("timer", 1)
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
				add("signal", 1)
				h.Signals[e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()]++
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				add("update", 1)
			case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
				ids = append(ids, e.GetChildWorkflowExecutionStartedEventAttributes().GetWorkflowExecution().GetWorkflowId())
			}
		}
	}
	return h, nil
}

// Add sums two counts.
func (h Hops) Add(o Hops) Hops {
	out := Hops{Workflows: h.Workflows + o.Workflows, Events: h.Events + o.Events, Tasks: h.Tasks + o.Tasks,
		Actions: h.Actions + o.Actions, ByType: map[string]int{}, Signals: map[string]int{}}
	for _, m := range []map[string]int{h.ByType, o.ByType} {
		for k, n := range m {
			out.ByType[k] += n
		}
	}
	for _, m := range []map[string]int{h.Signals, o.Signals} {
		for k, n := range m {
			out.Signals[k] += n
		}
	}
	return out
}

// sessionTurns lists the turn workflows of a session that exist.
func sessionTurns(ctx context.Context, c client.Client, session string) ([]string, error) {
	var ids []string
	for n := 0; ; n++ {
		id := signals.TurnWorkflowID(session, signals.TurnID(n))
		_, err := c.DescribeWorkflowExecution(ctx, id, "")
		var missing *serviceerror.NotFound
		if errors.As(err, &missing) {
			return ids, nil
		}
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", id, err)
		}
		ids = append(ids, id)
	}
}

func onlyChangeVersion(e *historypb.HistoryEvent) bool {
	f := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
	for k := range f {
		if k != "TemporalChangeVersion" {
			return false
		}
	}
	return true
}
