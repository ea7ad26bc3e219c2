package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Tasks lists the session's tasks (docs/tasks.md, "See and stop tasks"):
// while a turn runs, that turn's (its query signals.QueryTurnTasks:
// working, settled, and the idle resumable tasks it may continue), with
// each working task's progress read from its activity's last heartbeat
// (one DescribeWorkflowExecution); between turns, the idle resumable
// tasks the session keeps (its state query). sum is the session's
// summary when the caller read it already (nil: read it). A turn that
// ended meanwhile answers the session's idle tasks.
func (s *Service) Tasks(ctx context.Context, id string, sum *signals.SessionSummary) (protocol.SessionTasks, error) {
	out := protocol.SessionTasks{SessionID: id, Tasks: []protocol.TaskInfo{}}
	if sum == nil {
		got, err := s.Summary(ctx, id)
		if err != nil {
			return out, err
		}
		sum = &got
	}
	if sum.ActiveTurn != nil {
		var ts []protocol.TaskInfo
		v, err := query.Value(ctx, s.Client, sum.ActiveTurn.WorkflowID, "", signals.QueryTurnTasks)
		if err == nil && v.Get(&ts) == nil {
			out.TurnID = sum.ActiveTurn.TurnID
			out.Tasks = append(out.Tasks, ts...)
			s.taskProgress(ctx, sum.ActiveTurn.WorkflowID, out.Tasks)
			return out, nil
		}
		if err != nil && ctx.Err() != nil {
			return out, err
		}
	}
	out.Tasks = append(out.Tasks, sum.Tasks...)
	return out, nil
}

// taskProgress fills in the progress of the working tasks from the turn's
// pending activities (a task's tool reports it with
// tools.Context.ReportProgress: its heartbeat details). Best effort: a
// turn it cannot describe leaves them without.
func (s *Service) taskProgress(ctx context.Context, workflowID string, ts []protocol.TaskInfo) {
	working := map[string]int{}
	for i, t := range ts {
		if t.Status == protocol.TaskWorking && t.CallID != "" {
			working[signals.ToolActivityID(t.CallID)] = i
		}
	}
	if len(working) == 0 {
		return
	}
	d, err := s.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return
	}
	for _, pa := range d.GetPendingActivities() {
		i, ok := working[pa.GetActivityId()]
		hd := pa.GetHeartbeatDetails().GetPayloads()
		if !ok || len(hd) == 0 {
			continue
		}
		var p protocol.Progress
		raw := hd[len(hd)-1].GetData()
		var probe map[string]json.RawMessage
		if json.Unmarshal(raw, &probe) != nil || probe["progress"] == nil || json.Unmarshal(raw, &p) != nil {
			continue // a checkpoint, not progress
		}
		ts[i].Progress = &p
	}
}

// ErrUnknownTask: the running turn has no task of that id (or no turn
// runs); ErrTaskNotWorking: the task is idle or settled.
var (
	ErrUnknownTask    = errors.New("the session's running turn has no such task")
	ErrTaskNotWorking = errors.New("the task has no work to stop")
)

// CancelTask stops one working task of the session's running turn (the
// turn's signals.UpdateTaskCancel). sum is the session's summary when the
// caller read it already. Errors: ErrUnknownTask, ErrTaskNotWorking (the
// validator refused; nothing was recorded), Summary's.
func (s *Service) CancelTask(ctx context.Context, id string, sum *signals.SessionSummary, req signals.TaskCancelRequest) (signals.TaskCancelResult, error) {
	var res signals.TaskCancelResult
	if sum == nil {
		got, err := s.Summary(ctx, id)
		if err != nil {
			return res, err
		}
		sum = &got
	}
	if sum.ActiveTurn == nil {
		return res, ErrUnknownTask
	}
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   sum.ActiveTurn.WorkflowID,
		UpdateName:   signals.UpdateTaskCancel,
		Args:         []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, &res)
	}
	if err != nil {
		var app *temporal.ApplicationError
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &app) && app.Type() == signals.ErrTypeUnknownTask:
			return res, ErrUnknownTask
		case errors.As(err, &app) && app.Type() == signals.ErrTypeTaskNotWorking:
			return res, fmt.Errorf("%w: %s", ErrTaskNotWorking, app.Message())
		case errors.As(err, &nf):
			return res, ErrUnknownTask // the turn ended meanwhile
		}
		if c := s.classify(ctx, id, err); errors.Is(c, ErrEnded) || errors.Is(c, ErrNotFound) {
			return res, c
		}
		return res, fmt.Errorf("cancel task %s of session %s: %w", req.TaskID, id, err)
	}
	return res, nil
}
