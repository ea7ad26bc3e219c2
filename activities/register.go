package activities

import (
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/work"
)

// Register adds eve's activities to w under the names eve's workflows
// call them by: register the workflows (workflows.Register) on the same
// worker. agent.Register does both for an agent.
func Register(w worker.ActivityRegistry, o Options) error {
	if o.Model == nil {
		return errors.New("register eve's activities: a model is required")
	}
	if o.Store == nil {
		return errors.New("register eve's activities: a payload store is required (the store the worker's client uses)")
	}
	a := newActivitySet(o)
	if o.Actions != nil {
		var err error
		if a.actions, err = newActionsConfig(*o.Actions); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		name string
		fn   any
	}{
		{work.ModelStepName, a.ModelStep},
		{work.ExecuteToolName, a.ExecuteTool},
		{work.ResolveToolsName, a.ResolveTools},
		{work.EvaluateApprovalName, a.EvaluateApproval},
		{work.EvaluateResponseName, a.EvaluateResponse},
		{work.AppendConversationName, a.AppendConversation},
		{work.ReviseConversationName, a.ReviseConversation},
		{work.CompactName, a.Compact},
		{work.TurnEventsName, a.TurnEvents},
		{work.RemindName, a.Remind},
	} {
		w.RegisterActivityWithOptions(r.fn, activity.RegisterOptions{Name: r.name})
	}
	return nil
}

// newActivitySet is the receiver of o's activities (without completion
// URLs; Register adds them).
func newActivitySet(o Options) *activitySet {
	a := &activitySet{Options: o}
	if o.Store != nil {
		a.conversations = conversation.NewFormat(o.Store, o.ConversationFormat)
	}
	return a
}
