// Package query sends Temporal workflow queries that do not stall.
//
// A query now and then goes unanswered for the sticky task queue's
// schedule-to-start timeout (5 s) before the server sends it to the normal
// task queue. The stalls traced began shortly before a workflow task of the
// same workflow was scheduled, and the raw SDK shows them as well: in a run that queried 200 short workflows without a
// pause, 16 of them had one query answered after 5.0 s, every other query
// within 8 ms (p99). A second copy of the stalled query is answered at once,
// so a query still unanswered after a while is sent again and the first
// answer wins.
package query

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// hedges are the delays, from the first send, after which a query still
// unanswered is sent again. A second is far above a query's usual latency
// (milliseconds) and well below the 5 s stall. A query that is slow for a
// reason (it waits behind a long workflow task, or replays a long history on
// the worker) is sent at most three times.
var hedges = []time.Duration{time.Second, 3 * time.Second}

// Workflow is client.QueryWorkflowWithOptions, hedged.
func Workflow(ctx context.Context, c client.Client, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	return Hedged(ctx, hedges, func(ctx context.Context) (*client.QueryWorkflowWithOptionsResponse, error) {
		return c.QueryWorkflowWithOptions(ctx, req)
	})
}

// Value is client.QueryWorkflow, hedged.
func Value(ctx context.Context, c client.Client, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	return Hedged(ctx, hedges, func(ctx context.Context) (converter.EncodedValue, error) {
		return c.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
	})
}

// Hedged calls call, and calls it again after each of hedges (measured from
// the first call) while no call has returned. It returns what the first
// call to return returned, and cancels the others.
func Hedged[T any](ctx context.Context, hedges []time.Duration, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	results := make(chan result, len(hedges)+1)
	send := func() {
		go func() {
			v, err := call(ctx)
			results <- result{v, err}
		}()
	}
	start := time.Now()
	send()
	for _, h := range hedges {
		timer := time.NewTimer(h - time.Since(start))
		select {
		case r := <-results:
			timer.Stop()
			return r.v, r.err
		case <-timer.C:
			send()
		}
	}
	r := <-results
	return r.v, r.err
}
