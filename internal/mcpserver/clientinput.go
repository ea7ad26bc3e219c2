package mcpserver

// Client input rounds (SEP-2322 multi round-trip requests, ephemeral): a
// tool with tools.Tool.ClientInput may end a round asking the MCP client
// for input (tools.AskClient). Each round is one execution; the client's
// answers and the tool's state start the next. The state travels in
// requestState, signed with the server's key (Options.StateKey), so the
// client can neither read it as something else's nor alter it, and any
// instance that shares the key continues the rounds. The SDK answers
// clients of 2026-07-28 with the InputRequiredResult and, for older
// session clients, puts the requests to them itself (elicitation/create,
// sampling/createMessage, roots/list) and calls the handler again.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/executions"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
)

// roundStateTTL bounds how long a requestState continues its rounds.
const roundStateTTL = time.Hour

// roundState is what requestState carries, signed.
type roundState struct {
	Tool    string          `json:"t"`
	User    string          `json:"u"`
	State   json.RawMessage `json:"s,omitempty"`
	Expires int64           `json:"x"`
}

// newStateKey is a random key for a server configured without one: its
// requestStates verify only on this process.
func newStateKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(err)
	}
	return k
}

func (s *Server) signState(rs roundState) (string, error) {
	b, err := json.Marshal(rs)
	if err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload)), nil
}

func (s *Server) mac(payload string) []byte {
	m := hmac.New(sha256.New, s.opts.StateKey)
	m.Write([]byte("eve.mcp.requestState/v1\x00" + payload))
	return m.Sum(nil)
}

// openState verifies a requestState for tool and user.
func (s *Server) openState(raw, tool, user string) (json.RawMessage, error) {
	bad := rpcError(jsonrpc.CodeInvalidParams, "requestState failed its integrity check (altered, expired, or minted by a server with another EVE_MCP_STATE_KEY): call %s again without requestState", tool)
	payload, sig, ok := strings.Cut(raw, ".")
	if !ok {
		return nil, bad
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(payload)) {
		return nil, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	var rs roundState
	if err != nil || json.Unmarshal(b, &rs) != nil || rs.Tool != tool || rs.User != user || time.Now().Unix() > rs.Expires {
		return nil, bad
	}
	return rs.State, nil
}

// clientCapabilities is what the caller declared: a stateless request's
// own _meta, else its session's initialize.
func clientCapabilities(req *mcp.CallToolRequest) json.RawMessage {
	if req.Params != nil {
		if c, ok := req.Params.Meta[metaClientCapabilities]; ok && c != nil {
			if b, err := json.Marshal(c); err == nil {
				return b
			}
		}
	}
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil && ip.Capabilities != nil {
			if b, err := json.Marshal(ip.Capabilities); err == nil {
				return b
			}
		}
	}
	return json.RawMessage("{}")
}

// taskRound is a task-augmented tools/call of a client-input tool
// (SEP-2663 with SEP-2322): its rounds ask synchronously, with
// InputRequiredResult, and the round that does not ask becomes the task
// (CreateTaskResult), so the task carries no requestState. The answer
// waits until the round asks or ends, at most askWait; a round still
// running then is the task.
func (s *Server) taskRound(ctx context.Context, e *entry, user string, p modernParams) (any, error) {
	round := &protocol.ClientRound{Capabilities: p.Meta[metaClientCapabilities], Responses: p.InputResponses, Task: true}
	if p.RequestState != "" {
		st, err := s.openState(p.RequestState, e.canonical, user)
		if err != nil {
			return nil, err
		}
		round.State = st
	}
	res, err := s.svc.StartRound(ctx, e.canonical, user, p.Arguments, round, true)
	if err != nil {
		var apiErr *toolsapi.Error
		if errors.As(err, &apiErr) && apiErr.Status < 500 {
			return nil, rpcError(jsonrpc.CodeInvalidParams, "%s", apiErr.Message)
		}
		return nil, err
	}
	st, err := s.awaitRound(ctx, res.ID)
	if err != nil {
		return nil, err
	}
	if ask, ok := askedClient(st.Result); ok && ask.BeforeTask {
		out, err := s.inputRequired(e, user, round, ask)
		if err != nil {
			return nil, err
		}
		return map[string]any{"resultType": "input_required", "inputRequests": out.InputRequests, "requestState": out.RequestState}, nil
	}
	st, _, err = s.ownedTask(ctx, user, res.ID)
	if err != nil {
		return nil, err
	}
	t := s.extTask(st.Result, st.StartedAt, st.ClosedAt)
	t["resultType"] = "task"
	return t, nil
}

// awaitRound waits until a task's first round ends or asks its client
// within the task, at most askWait, and returns the execution's state.
func (s *Server) awaitRound(ctx context.Context, id string) (executions.State, error) {
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		st, _, err := s.svc.Describe(ctx, id)
		if err != nil && ctx.Err() == nil {
			return st, err
		}
		if err == nil && st.Result.Status.Terminal() {
			return st, nil
		}
		if err == nil {
			if out, err := s.svc.Pending(ctx, id, st.RunID); err == nil && len(out.ClientInput) > 0 {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, nil // still running: the task answers
		case <-tick.C:
		}
	}
}

// roundOf is the round a tools/call starts: its verified state, its
// answers and the client's capabilities.
func (s *Server) roundOf(e *entry, user string, req *mcp.CallToolRequest) (*protocol.ClientRound, error) {
	r := &protocol.ClientRound{Capabilities: clientCapabilities(req)}
	p := req.Params
	if p.RequestState != "" {
		st, err := s.openState(p.RequestState, e.canonical, user)
		if err != nil {
			return nil, err
		}
		r.State = st
	}
	if len(p.InputResponses) > 0 {
		r.Responses = map[string]json.RawMessage{}
		for id, v := range p.InputResponses {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, rpcError(jsonrpc.CodeInvalidParams, "inputResponses[%q]: %v", id, err)
			}
			r.Responses[id] = b
		}
	}
	return r, nil
}

// callRound runs one round of a client-input tool and answers its result,
// or the InputRequiredResult that asks the client.
func (s *Server) callRound(ctx context.Context, e *entry, user string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	round, err := s.roundOf(e, user, req)
	if err != nil {
		return nil, err
	}
	res, err := s.svc.StartRound(ctx, e.canonical, user, req.Params.Arguments, round, false)
	if err != nil {
		return callResult(res, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	res, err = s.svc.Wait(wctx, res.ID, 0)
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		return errorResult(fmt.Sprintf("execution %s did not finish within %s; it goes on", res.ID, s.opts.CallTimeout)), nil
	}
	if err == nil {
		if ask, ok := askedClient(res); ok {
			return s.inputRequired(e, user, round, ask)
		}
	}
	return callResult(res, err)
}

// askedClient reads the requests of a round that asked.
func askedClient(res catalog.ExecutionResult) (protocol.ClientInputRequest, bool) {
	var ask protocol.ClientInputRequest
	if res.Error == nil || res.Error.Code != protocol.CodeClientInputRequired || json.Unmarshal(res.Output, &ask) != nil || len(ask.InputRequests) == 0 {
		return ask, false
	}
	return ask, true
}

// inputRequired is the InputRequiredResult of a round that asked, or
// MissingRequiredClientCapability when the client did not declare what a
// request needs (a server must not rely on undeclared capabilities).
func (s *Server) inputRequired(e *entry, user string, round *protocol.ClientRound, ask protocol.ClientInputRequest) (*mcp.CallToolResult, error) {
	missing := map[string]any{}
	for _, r := range ask.InputRequests {
		c := protocol.CapabilityOf(r.Method)
		if c == "" {
			return nil, rpcError(jsonrpc.CodeInternalError, "tool %s asked its client with method %q: want %s, %s or %s", e.canonical, r.Method, protocol.ClientElicit, protocol.ClientSample, protocol.ClientListRoots)
		}
		if !round.Declares(c) {
			missing[c] = map[string]any{}
		}
	}
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for c := range missing {
			names = append(names, c)
		}
		sort.Strings(names)
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": missing})
		return nil, &jsonrpc.Error{Code: codeMissingRequiredCapability, Data: data,
			Message: fmt.Sprintf("tool %s needs the client capabilities %s, which this client did not declare", e.canonical, strings.Join(names, ", "))}
	}
	b, err := json.Marshal(ask.InputRequests)
	if err != nil {
		return nil, err
	}
	var reqs mcp.InputRequestMap
	if err := json.Unmarshal(b, &reqs); err != nil {
		return nil, fmt.Errorf("mcpserver: tool %s asked for input MCP cannot carry: %w", e.canonical, err)
	}
	state, err := s.signState(roundState{Tool: e.canonical, User: user, State: ask.State, Expires: time.Now().Add(roundStateTTL).Unix()})
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{InputRequests: reqs, RequestState: state}, nil
}
