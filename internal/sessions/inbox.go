package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/signals"
)

// InboxQuery narrows the inbox: every field is optional.
type InboxQuery struct {
	Tool      string
	SessionID string
	// Requester is the requester's principal id.
	Requester string
	Kind      string
	// OpenedBefore / OpenedAfter bound when the turn first parked on a
	// request still open (its oldest one).
	OpenedBefore, OpenedAfter time.Time
	PageSize                  int
	Cursor                    []byte
}

// DefaultInboxPageSize is the turns one inbox page reads.
const DefaultInboxPageSize = 100

// ErrInboxUnavailable: the namespace lacks the inbox's search attributes.
var ErrInboxUnavailable = errors.New("the inbox needs eve's search attributes (EveInbox, EveRequester, EveRequestKinds, EveParkedAt) on the namespace: " +
	"run `eve doctor` for the commands that register them (eve dev registers them itself), then restart the workers so new turns publish their requests")

// quote makes a Visibility string literal.
func quote(s string) string { return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"` }

// quoteList makes the list of an IN clause: Visibility string literals,
// comma-separated.
func quoteList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = quote(s)
	}
	return strings.Join(quoted, ", ")
}

// Query renders q as a Visibility query over parked turns.
func (q InboxQuery) Query() string {
	parts := []string{`WorkflowType = ` + quote(signals.TurnWorkflow), `ExecutionStatus = "Running"`, `EveInbox = "open"`}
	add := func(attr, v string) {
		if v != "" {
			parts = append(parts, attr+" = "+quote(v))
		}
	}
	add("EveTools", q.Tool)
	add("EveSessionId", q.SessionID)
	add("EveRequester", q.Requester)
	add("EveRequestKinds", q.Kind)
	if !q.OpenedBefore.IsZero() {
		parts = append(parts, "EveParkedAt < "+quote(q.OpenedBefore.UTC().Format(time.RFC3339Nano)))
	}
	if !q.OpenedAfter.IsZero() {
		parts = append(parts, "EveParkedAt > "+quote(q.OpenedAfter.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(parts, " AND ")
}

// Inbox reads one page of parked turns and their open requests: one
// Visibility query, whatever the number of sessions.
func (s *Service) Inbox(ctx context.Context, q InboxQuery) ([]signals.InboxMemo, []byte, error) {
	size := q.PageSize
	if size <= 0 {
		size = DefaultInboxPageSize
	}
	resp, err := s.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q.Query(), PageSize: int32(size), NextPageToken: q.Cursor})
	if err != nil {
		var inv *serviceerror.InvalidArgument
		if errors.As(err, &inv) && strings.Contains(inv.Error(), "Eve") {
			return nil, nil, fmt.Errorf("%w (%v)", ErrInboxUnavailable, err)
		}
		return nil, nil, fmt.Errorf("list the inbox from Visibility: %w", err)
	}
	dc := converter.GetDefaultDataConverter()
	var out []signals.InboxMemo
	for _, e := range resp.GetExecutions() {
		f, ok := e.GetMemo().GetFields()[signals.MemoInbox]
		if !ok {
			continue
		}
		var m signals.InboxMemo
		if err := dc.FromPayload(f, &m); err != nil || len(m.Items) == 0 {
			continue // not parked any more (Visibility lags the memo)
		}
		out = append(out, m)
	}
	return out, resp.GetNextPageToken(), nil
}

// TurnInbox reads the open requests a turn publishes (its memo), from the
// turn's mutable state (not Visibility, which may lag): the respond route
// reads an escalation from it. A turn without the memo gives an empty one.
func (s *Service) TurnInbox(ctx context.Context, turnWorkflowID string) (signals.InboxMemo, error) {
	d, err := s.Client.DescribeWorkflowExecution(ctx, turnWorkflowID, "")
	if err != nil {
		return signals.InboxMemo{}, fmt.Errorf("read the turn's open requests: %w", err)
	}
	var m signals.InboxMemo
	if f, ok := d.GetWorkflowExecutionInfo().GetMemo().GetFields()[signals.MemoInbox]; ok {
		if err := converter.GetDefaultDataConverter().FromPayload(f, &m); err != nil {
			return signals.InboxMemo{}, fmt.Errorf("decode the turn's open requests: %w", err)
		}
	}
	return m, nil
}
