package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/eve-temporal/eve/internal/query"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// client is the worker's client, which these activities need.
func (a *activitySet) client() (client.Client, error) {
	if a.Client == nil {
		return nil, temporal.NewNonRetryableApplicationError("the worker's agent has no Temporal client (agent.Host.Client)", work.ErrTypeNoClient, nil)
	}
	return a.Client, nil
}

// TurnEvents reads the events a turn workflow holds, by its events query,
// page by page; a closed workflow answers from its replayed history. A
// session keeps the events of a turn that ended without a result
// (terminated by an operator, timed out), so the indexes a stream has read
// keep their events. It reads and changes nothing, so running it again
// when the session's workflow task fails is harmless.
func (a *activitySet) TurnEvents(ctx context.Context, workflowID string) ([]protocol.Event, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	var all []protocol.Event
	for {
		v, err := query.Value(ctx, c, workflowID, "", signals.QueryTurnEvents, len(all))
		if err != nil {
			return nil, fmt.Errorf("query the events of %s: %w", workflowID, err)
		}
		var page []protocol.Event
		if err := v.Get(&page); err != nil {
			return nil, fmt.Errorf("decode the events of %s: %w", workflowID, err)
		}
		if len(page) == 0 {
			return all, nil
		}
		all = append(all, page...)
	}
}
