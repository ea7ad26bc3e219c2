package mcpserver

// The tasks extension of MCP 2026-07-28 (io.modelcontextprotocol/tasks,
// SEP-2663), to the schema of the modelcontextprotocol/ext-tasks
// repository as the conformance suite 0.2.0-alpha.12 checks it. The Go SDK
// (v1.8.0) serves the stateless core (server/discover, _meta, header
// validation, InputRequiredResult) but not this extension, so it is
// answered here, before the SDK, for stateless requests; it can move into
// the SDK as a server option once the SDK implements the extension.
//
// A task is an execution workflow: tools/call of a task tool starts one and
// answers a CreateTaskResult once Temporal has recorded it; tasks/get
// describes it; tasks/cancel cancels it; tasks/update delivers input. No
// state lives in the process, so any instance answers for any task.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Error codes of the stateless protocol (SEP-2575, SEP-2243).
const (
	codeHeaderMismatch             = -32020
	codeMissingRequiredCapability  = -32021
	modernVersion                  = "2026-07-28"
	metaProtocolVersion            = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities         = "io.modelcontextprotocol/clientCapabilities"
	taskStatusInputRequired        = "input_required"
	errTasksExtensionNotNegotiated = "this request needs the client capability extensions[\"" + TasksExtension + "\"]: declare it in _meta[\"" + metaClientCapabilities + "\"]"
)

// modernParams are the fields of a stateless request the extension reads.
type modernParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}

func (p modernParams) version() string {
	var v string
	_ = json.Unmarshal(p.Meta[metaProtocolVersion], &v)
	return v
}

func (p modernParams) tasksNegotiated() bool {
	var caps map[string]any
	return json.Unmarshal(p.Meta[metaClientCapabilities], &caps) == nil && caps != nil && capsHaveTasks(caps)
}

// extMethods are the extension's methods.
var extMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// serveTasksExt answers a stateless request that belongs to the tasks
// extension and reports whether it did; every other request goes to the
// SDK. Its headers are checked as the SDK checks the rest (SEP-2243).
func (h *httpTasks) serveTasksExt(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) bool {
	e, p, ok := h.s.extRoute(req)
	if !ok {
		return false
	}
	name := p.TaskID
	if req.Method == "tools/call" {
		name = p.Name
	}
	switch {
	case strings.TrimSpace(r.Header.Get("Mcp-Protocol-Version")) != modernVersion:
		writeRPC(w, http.StatusBadRequest, req.ID, nil, &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("the Mcp-Protocol-Version header must match _meta[%q] (%s)", metaProtocolVersion, modernVersion)})
		return true
	case strings.TrimSpace(r.Header.Get("Mcp-Method")) != req.Method:
		writeRPC(w, http.StatusBadRequest, req.ID, nil, &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("the Mcp-Method header must be the request's method %q", req.Method)})
		return true
	case strings.TrimSpace(r.Header.Get("Mcp-Name")) != name:
		writeRPC(w, http.StatusBadRequest, req.ID, nil, &jsonrpc.Error{Code: codeHeaderMismatch, Message: fmt.Sprintf("the Mcp-Name header must be %q (the request's %s)", name, map[bool]string{true: "tool name", false: "taskId"}[req.Method == "tools/call"])})
		return true
	}
	user, err := h.s.user(r.Header, auth.TokenInfoFromContext(r.Context()))
	if err != nil {
		writeRPC(w, http.StatusBadRequest, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()})
		return true
	}
	res, err := h.s.extAnswer(r.Context(), user, req.Method, e, p)
	if err != nil {
		we := rpcErrorOf(err)
		status := http.StatusOK
		if we.Code == jsonrpc.CodeInvalidParams || we.Code == codeMissingRequiredCapability {
			status = http.StatusBadRequest
		}
		writeRPC(w, status, req.ID, nil, we)
		return true
	}
	writeRPC(w, http.StatusOK, req.ID, res, nil)
	return true
}

// extRoute reports whether the tasks extension answers req (a stateless
// request of 2026-07-28: tasks/get, tasks/update, tasks/cancel, or
// tools/call of a task tool that runs as a task), on any transport.
func (s *Server) extRoute(req *jsonrpc.Request) (*entry, modernParams, bool) {
	var p modernParams
	if !req.IsCall() || json.Unmarshal(req.Params, &p) != nil || p.version() != modernVersion {
		return nil, p, false
	}
	var e *entry
	switch {
	case extMethods[req.Method]:
	case req.Method == "tools/call":
		if e = s.entries[p.Name]; e == nil || e.taskSupport == "" {
			return nil, p, false
		}
		if !p.tasksNegotiated() && e.taskSupport == "optional" {
			return nil, p, false // a plain call, served by the SDK
		}
	default:
		return nil, p, false
	}
	return e, p, true
}

// extAnswer answers a routed extension request: MissingRequiredClientCapability
// unless the request negotiates the extension, else its result.
func (s *Server) extAnswer(ctx context.Context, user, method string, e *entry, p modernParams) (any, error) {
	if !p.tasksNegotiated() {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
		msg := errTasksExtensionNotNegotiated
		if e != nil {
			msg = fmt.Sprintf("tool %s runs only as a task: %s", p.Name, errTasksExtensionNotNegotiated)
		}
		return nil, &jsonrpc.Error{Code: codeMissingRequiredCapability, Message: msg, Data: data}
	}
	return s.tasksExt(ctx, user, method, e, p)
}

func rpcErrorOf(err error) *jsonrpc.Error {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return we
}

func writeRPC(w http.ResponseWriter, status int, id jsonrpc.ID, result any, rerr *jsonrpc.Error) {
	resp := &jsonrpc.Response{ID: id}
	if rerr != nil {
		resp.Error = rerr
	} else {
		b, err := json.Marshal(result)
		if err != nil {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		resp.Result = b
	}
	b, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// tasksExt runs one extension request for user.
func (s *Server) tasksExt(ctx context.Context, user, method string, e *entry, p modernParams) (any, error) {
	switch method {
	case "tools/call":
		if e.clientInput {
			return s.taskRound(ctx, e, user, p)
		}
		res, err := s.svc.StartAsking(ctx, e.canonical, user, p.Arguments)
		if err != nil {
			var apiErr *toolsapi.Error
			if errors.As(err, &apiErr) && apiErr.Status < 500 {
				return nil, rpcError(jsonrpc.CodeInvalidParams, "%s", apiErr.Message)
			}
			return nil, err
		}
		// Execute returned: Temporal has recorded the workflow, so tasks/get
		// resolves from here on, on any instance.
		st, _, err := s.ownedTask(ctx, user, res.ID)
		if err != nil {
			return nil, err
		}
		t := s.extTask(st.Result, st.StartedAt, st.ClosedAt)
		t["resultType"] = "task"
		return t, nil
	case "tasks/get":
		st, _, err := s.ownedTask(ctx, user, p.TaskID)
		if err != nil {
			return nil, err
		}
		t := s.extTask(st.Result, st.StartedAt, st.ClosedAt)
		t["resultType"] = "complete"
		if !st.Result.Status.Terminal() {
			// Only the workflow knows whether it waits for a person or for
			// the client: ask it.
			out, err := s.svc.Pending(ctx, p.TaskID, st.RunID)
			switch {
			case err != nil:
			case out.Approval != nil:
				t["status"] = taskStatusInputRequired
				t["statusMessage"] = "waiting for your approval"
				t["inputRequests"] = map[string]any{out.Approval.RequestID: approvalElicitation(out.Approval)}
			case len(out.ClientInput) > 0:
				t["status"] = taskStatusInputRequired
				t["statusMessage"] = "waiting for your input"
				t["inputRequests"] = out.ClientInput
			}
		}
		return t, nil
	case "tasks/cancel":
		st, _, err := s.ownedTask(ctx, user, p.TaskID)
		if err != nil {
			return nil, err
		}
		if !st.Result.Status.Terminal() {
			if err := s.svc.RequestCancel(ctx, p.TaskID, st.RunID); err != nil {
				return nil, taskLookupError(p.TaskID, err)
			}
		}
		return map[string]any{"resultType": "complete"}, nil
	default: // tasks/update
		st, _, err := s.ownedTask(ctx, user, p.TaskID)
		if err != nil {
			return nil, err
		}
		if err := s.answerTaskInput(ctx, user, p.TaskID, st.RunID, p.InputResponses); err != nil {
			return nil, err
		}
		raw, ok := p.InputResponses[signals.ExecutionApprovalRequestID]
		if ok && !st.Result.Status.Terminal() {
			approved, reason := approvalAnswer(raw)
			// The workflow takes the answer only from the principal the
			// execution runs for, and only while it waits for one.
			if err := s.svc.AnswerApproval(ctx, p.TaskID, st.RunID, approved, reason, s.svc.UserOf(user)); err != nil {
				var apiErr *toolsapi.Error
				if !errors.As(err, &apiErr) || apiErr.Code != "approval_refused" {
					return nil, err
				}
				// Answered already, or not waiting: the ack stands, and
				// tasks/get tells the state.
			}
		}
		return map[string]any{"resultType": "complete"}, nil
	}
}

// approvalElicitation is the form that asks the caller to approve a call.
func approvalElicitation(a *signals.ExecutionApproval) map[string]any {
	msg := fmt.Sprintf("Approve the call to %s", a.Tool)
	if len(a.Input) > 0 && string(a.Input) != "{}" {
		msg += " with " + truncate(string(a.Input), 512)
	}
	if a.Reason != "" {
		msg += " (" + a.Reason + ")"
	}
	return map[string]any{
		"method": "elicitation/create",
		"params": map[string]any{
			"mode":    "form",
			"message": msg + "?",
			"requestedSchema": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"confirm": map[string]any{"type": "boolean", "title": "Approve", "description": "true runs the call; false denies it"},
					"reason":  map[string]any{"type": "string", "title": "Reason", "description": "why (optional)"},
				},
				"required": []string{"confirm"},
			},
		},
	}
}

// approvalAnswer reads an elicitation result: accept with confirm true
// (or no confirm field) approves; decline, cancel or confirm false denies.
func approvalAnswer(raw json.RawMessage) (approved bool, reason string) {
	var r struct {
		Action  string `json:"action"`
		Content struct {
			Confirm *bool  `json:"confirm"`
			Reason  string `json:"reason"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return false, "the answer could not be read"
	}
	if r.Action != "accept" {
		return false, r.Content.Reason
	}
	return r.Content.Confirm == nil || *r.Content.Confirm, r.Content.Reason
}

// extTask is the extension's (detailed) task: a terminal task inlines the
// tool's result, or the protocol error of an execution that ended without
// one.
func (s *Server) extTask(res catalog.ExecutionResult, created, closed time.Time) map[string]any {
	updated := time.Now().UTC()
	if !closed.IsZero() {
		updated = closed.UTC()
	}
	t := map[string]any{
		"taskId":         res.ID,
		"status":         TaskWorking,
		"createdAt":      created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":  updated.Format(time.RFC3339Nano),
		"ttlMs":          s.opts.TaskTTL.Milliseconds(),
		"pollIntervalMs": s.opts.PollInterval.Milliseconds(),
	}
	switch {
	case !res.Status.Terminal():
		t["statusMessage"] = string(res.Status)
	case res.Status == catalog.StatusCanceled && (res.Error == nil || res.Error.Code != "terminated"):
		t["status"] = TaskCancelled
		t["statusMessage"] = "the execution was cancelled"
	case res.Error != nil && (res.Error.Code == "terminated" || res.Error.Code == protocol.CodeToolPanicked):
		// Not the tool's answer: its execution broke (an operator ended
		// it, or its code crashed), a protocol-level failure.
		t["status"] = TaskFailed
		t["error"] = map[string]any{"code": jsonrpc.CodeInternalError, "message": res.Error.Message}
	default:
		// The tool ran: success, and tool errors alike, are a completed
		// task whose result says which (isError).
		out, err := callResult(res, nil)
		if err != nil {
			t["status"] = TaskFailed
			t["error"] = map[string]any{"code": jsonrpc.CodeInternalError, "message": err.Error()}
			break
		}
		b, _ := json.Marshal(out)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		m["resultType"] = "complete"
		t["status"] = TaskCompleted
		t["result"] = m
	}
	if msg, ok := t["statusMessage"].(string); ok && strings.TrimSpace(msg) == "" {
		delete(t, "statusMessage")
	}
	return t
}

// answerTaskInput delivers the responses to a task's pending client
// requests (all but the approval's). Answers to requests the task no
// longer waits for are dropped, as a retried tasks/update's are: the ack
// stands, and tasks/get tells the state.
func (s *Server) answerTaskInput(ctx context.Context, user, id, runID string, responses map[string]json.RawMessage) error {
	out, err := s.svc.Pending(ctx, id, runID)
	if err != nil || len(out.ClientInput) == 0 {
		return nil
	}
	mine := map[string]json.RawMessage{}
	for k, v := range responses {
		if _, ok := out.ClientInput[k]; ok {
			mine[k] = v
		}
	}
	if len(mine) == 0 {
		return nil
	}
	err = s.svc.AnswerClientInput(ctx, id, runID, mine, s.svc.UserOf(user))
	var apiErr *toolsapi.Error
	if errors.As(err, &apiErr) && apiErr.Code == "input_refused" {
		return nil
	}
	return err
}
