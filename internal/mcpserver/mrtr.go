package mcpserver

// Approvals in plain calls of 2026-07-28 clients: a multi round-trip
// request (SEP-2322, which the Go SDK implements). The first tools/call of
// an approval-gated tool starts its execution, which waits for the answer,
// and returns an InputRequiredResult asking for it (an elicitation form)
// with the execution id as requestState; the retry carries the answer,
// which the execution takes (from its owner only), and waits for the result.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/signals"
)

// askWait bounds how long the first round waits for the execution to
// reach its approval.
const askWait = 10 * time.Second

// multiRoundTrip reports a call from a client that can answer an
// InputRequiredResult with an elicitation: protocol 2026-07-28 or later,
// and the elicitation capability.
func multiRoundTrip(req *mcp.CallToolRequest) bool {
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.ProtocolVersion < modernVersion {
			return false
		}
	}
	if req.Params == nil {
		return false
	}
	var caps struct {
		Elicitation json.RawMessage `json:"elicitation"`
	}
	raw, _ := json.Marshal(req.Params.Meta[metaClientCapabilities])
	return json.Unmarshal(raw, &caps) == nil && len(caps.Elicitation) > 0 && string(caps.Elicitation) != "null"
}

func (s *Server) callAsking(ctx context.Context, e *entry, user string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	if p.RequestState == "" {
		res, err := s.svc.StartAsking(ctx, e.canonical, user, p.Arguments)
		if err != nil {
			return callResult(res, err)
		}
		pending, err := s.awaitApproval(ctx, res.ID)
		if err != nil {
			return nil, err
		}
		if pending == nil { // it ran without asking (a custom policy let it)
			return s.finish(ctx, res.ID)
		}
		form := approvalElicitation(pending)["params"].(map[string]any)
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{pending.RequestID: &mcp.ElicitParams{Mode: "form", Message: form["message"].(string), RequestedSchema: form["requestedSchema"]}},
			RequestState:  res.ID,
		}, nil
	}
	id := p.RequestState
	st, _, err := s.ownedTask(ctx, user, id) // a state naming another's execution is unknown
	if err != nil {
		return nil, err
	}
	if !st.Result.Status.Terminal() {
		resp, ok := p.InputResponses[signals.ExecutionApprovalRequestID].(*mcp.ElicitResult)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses must answer %q (an elicitation result) for execution %s", signals.ExecutionApprovalRequestID, id)}
		}
		raw, _ := json.Marshal(resp)
		approved, reason := approvalAnswer(raw)
		if err := s.svc.AnswerApproval(ctx, id, st.RunID, approved, reason, s.svc.UserOf(user)); err != nil {
			var apiErr *toolsapi.Error
			if !errors.As(err, &apiErr) || apiErr.Code != "approval_refused" {
				return nil, err
			}
			// Answered already (a retried retry): its result follows.
		}
	}
	return s.finish(ctx, id)
}

// awaitApproval waits until the execution asks (its approval request) or
// ends (nil).
func (s *Server) awaitApproval(ctx context.Context, id string) (*signals.ExecutionApproval, error) {
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, _, err := s.svc.Describe(ctx, id)
		if err != nil {
			return nil, err
		}
		if st.Result.Status.Terminal() {
			return nil, nil
		}
		if p, err := s.svc.PendingApproval(ctx, id, st.RunID); err == nil && p != nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("execution %s did not reach its approval within %s; it goes on: retry the call", id, askWait)
		case <-tick.C:
		}
	}
}

// finish waits up to CallTimeout for the execution and answers its result.
func (s *Server) finish(ctx context.Context, id string) (*mcp.CallToolResult, error) {
	wctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	res, err := s.svc.Wait(wctx, id, 0)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return errorResult(fmt.Sprintf("execution %s did not finish within %s; it goes on", id, s.opts.CallTimeout)), nil
	}
	return callResult(res, err)
}
