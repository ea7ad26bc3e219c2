package toolsapi

import (
	"github.com/eve-temporal/eve/internal/httpbody"
	"github.com/eve-temporal/eve/signals"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/internal/executions"
	"github.com/eve-temporal/eve/internal/httpjson"
)

// Routes, relative to the server root. Mount Handler at "/v1/".
const (
	PathTools          = "/v1/tools"
	PathSearch         = "/v1/tools/search"
	PathToolCalls      = "/v1/tools/execute-tool-calls"
	PathExecutions     = "/v1/executions/"
	IdempotencyKeyHTTP = "Idempotency-Key"
)

// ExecuteRequest is the body of POST /v1/tools/{name}/execute
// (ExecuteToolOptions in the reference, plus waitMs).
type ExecuteRequest struct {
	catalog.ExecuteToolOptions
	// WaitMs bounds a sync execute's wait (default and cap: the server's
	// SyncWait); the answer is then the running execution (202).
	WaitMs int `json:"waitMs,omitempty"`
}

// RunRequest is the body of POST /v1/tools/{name}/run.
type RunRequest struct {
	UserID         string                `json:"userId,omitempty"`
	Input          json.RawMessage       `json:"input"`
	Mode           catalog.ExecutionMode `json:"mode,omitempty"`
	IdempotencyKey string                `json:"idempotencyKey,omitempty"`
	ConnectionID   string                `json:"connectionId,omitempty"`
	// TimeoutMs bounds the wait (default the server's RunTimeout, at most
	// its MaxWait). On timeout the answer is 504 run_timeout with the
	// execution id; the execution goes on.
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// ToolCallsRequest is the body of POST /v1/tools/execute-tool-calls.
type ToolCallsRequest struct {
	// Provider is "anthropic" (calls are tool_use blocks) or "openai"
	// (calls are Chat Completions tool calls).
	Provider string          `json:"provider"`
	Calls    json.RawMessage `json:"calls"`
	// NameMap is the exact map sent with the tools (required).
	NameMap      *catalog.ToolNameMap  `json:"nameMap"`
	UserID       string                `json:"userId,omitempty"`
	ConnectionID string                `json:"connectionId,omitempty"`
	Mode         catalog.ExecutionMode `json:"mode,omitempty"`
	PollMs       int                   `json:"pollMs,omitempty"`
	TimeoutMs    int                   `json:"timeoutMs,omitempty"`
}

// ToolCallsResponse lists one result per call, in the calls' order:
// Anthropic tool_result blocks or OpenAI role:"tool" messages.
type ToolCallsResponse struct {
	Provider string `json:"provider"`
	Results  any    `json:"results"`
}

// ToolResponse is GET /v1/tools/{name}.
type ToolResponse struct {
	Tool catalog.Definition `json:"tool"`
	// Wire is the tool's provider-safe name in this catalog.
	Wire string `json:"wire"`
	// Executable is false for client tools and tools only listed for
	// discovery; Reason says why.
	Executable bool   `json:"executable"`
	Reason     string `json:"reason,omitempty"`
}

// Handler serves the tools API:
//
//	GET  /v1/tools                       get (query: toolkits, capability, format, includeAsync, strict, mcpWireNames)
//	GET  /v1/tools/{name}                one definition
//	POST /v1/tools/search                search
//	POST /v1/tools/{name}/execute        execute (200 when ended, 202 when queued or running)
//	POST /v1/tools/{name}/run            execute and wait (504 run_timeout: it goes on)
//	POST /v1/tools/execute-tool-calls    executeToolCalls (anthropic | openai)
//	GET  /v1/executions/{id}             fetch
//	POST /v1/executions/{id}/cancel      cancel
//
// Mount it at "/v1/" behind the API server's authentication. Errors are
// {ok:false, error, code}.
func (s *Service) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET "+PathTools, s.handleGet)
	m.HandleFunc("GET "+PathTools+"/{name}", s.handleTool)
	m.HandleFunc("POST "+PathSearch, s.handleSearch)
	m.HandleFunc("POST "+PathToolCalls, s.handleToolCalls)
	m.HandleFunc("POST "+PathTools+"/{name}/execute", s.handleExecute)
	m.HandleFunc("POST "+PathTools+"/{name}/run", s.handleRun)
	m.HandleFunc("GET "+PathExecutions+"{id}", s.handleExecution)
	m.HandleFunc("POST "+PathExecutions+"{id}/cancel", s.handleCancel)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no route " + r.Method + " " + r.URL.Path + " (see docs/tools-api.md)"})
	})
	return m
}

// caller is the request's authenticated principal (nil without
// Options.Caller).
func (s *Service) caller(r *http.Request) *auth.Principal {
	if s.opts.Caller == nil {
		return nil
	}
	return s.opts.Caller(r.Context())
}

// owner is the principal a request acts for (see Owner); 403 when it may
// not act for the user it names.
func (s *Service) owner(r *http.Request, requested string) (auth.Principal, error) {
	p, err := Owner(s.caller(r), requested, s.opts.DefaultUser)
	if err != nil {
		return p, &Error{Status: http.StatusForbidden, Code: "forbidden", Message: err.Error()}
	}
	return p, nil
}

func queryList(q map[string][]string, names ...string) []string {
	var out []string
	for _, n := range names {
		for _, v := range q[n] {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

func queryBool(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

func (s *Service) handleGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := catalog.GetToolsOptions{
		UserID:     q.Get("userId"),
		Toolkits:   queryList(q, "toolkits", "toolkit"),
		Capability: q.Get("capability"),
		Format:     catalog.Format(q.Get("format")),
	}
	for name, dst := range map[string]*bool{"includeAsync": &opts.IncludeAsync, "strict": &opts.Strict, "mcpWireNames": &opts.MCPWireNames} {
		v, err := queryBool(q.Get(name))
		if err != nil {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf("query %s=%q: want true or false", name, q.Get(name))})
			return
		}
		*dst = v
	}
	owner, err := s.owner(r, opts.UserID)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.GetFor(owner, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	httpjson.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	// Stream: a 10,000-tool bundle is megabytes; write it in small pieces.
	buf := getBuf()
	defer putBuf(buf)
	b, err := encodeGetResult((*buf)[:0], res, func(p []byte) error { _, err := w.Write(p); return err })
	if err == nil {
		_, _ = w.Write(append(b, '\n'))
	}
	*buf = b
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, flushAt+16<<10); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

func (s *Service) handleTool(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	owner, err := s.owner(r, r.URL.Query().Get("userId"))
	if err != nil {
		writeError(w, err)
		return
	}
	v := s.viewFor(owner)
	d, ok := v.cat.Lookup(name)
	if !ok {
		writeError(w, &Error{Status: http.StatusNotFound, Code: catalog.CodeUnknownTool, Message: fmt.Sprintf("unknown tool %q", name)})
		return
	}
	res := ToolResponse{Tool: d, Executable: true}
	res.Wire, _ = v.cat.NameMap().Wire(name)
	if err := s.executable(v, name, false); err != nil {
		res.Executable = false
		var e *Error
		if errors.As(err, &e) {
			res.Reason = e.Message
		}
	}
	httpjson.Write(w, http.StatusOK, res)
}

func (s *Service) handleSearch(w http.ResponseWriter, r *http.Request) {
	var opts catalog.SearchToolsOptions
	if !s.decode(w, r, &opts) {
		return
	}
	owner, err := s.owner(r, opts.UserID)
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.SearchFor(owner, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	if res.Tools == nil {
		res.Tools = []catalog.Definition{}
	}
	httpjson.Write(w, http.StatusOK, res)
}

func (s *Service) handleExecute(w http.ResponseWriter, r *http.Request) {
	var req ExecuteRequest
	if !s.decode(w, r, &req) {
		return
	}
	owner, err := s.owner(r, req.UserID)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get(IdempotencyKeyHTTP)
	}
	wait := s.opts.SyncWait
	if req.WaitMs > 0 {
		wait = min(wait, time.Duration(req.WaitMs)*time.Millisecond)
	}
	res, _, err := s.execute(r.Context(), r.PathValue("name"), owner, req.ExecuteToolOptions, wait)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if !res.Status.Terminal() {
		status = http.StatusAccepted
	}
	httpjson.Write(w, status, res)
}

func (s *Service) handleRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	if !s.decode(w, r, &req) {
		return
	}
	owner, err := s.owner(r, req.UserID)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get(IdempotencyKeyHTTP)
	}
	res, err := s.runResult(r.Context(), r.PathValue("name"), req.Input, owner, RunOptions{
		ConnectionID: req.ConnectionID, IdempotencyKey: req.IdempotencyKey, Mode: req.Mode,
		Timeout: time.Duration(req.TimeoutMs) * time.Millisecond,
	})
	var failed *ExecutionFailedError
	if errors.As(err, &failed) {
		// The execution ended: its result says how (the client raises it).
		httpjson.Write(w, http.StatusOK, res)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, res)
}

func (s *Service) handleToolCalls(w http.ResponseWriter, r *http.Request) {
	var req ToolCallsRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.NameMap == nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "nameMap is required: send the exact map that went out with the tools (GET /v1/tools answers it)"})
		return
	}
	owner, err := s.owner(r, req.UserID)
	if err != nil {
		writeError(w, err)
		return
	}
	exec := callExecutor{s: s, owner: &owner}
	opts := catalog.ExecuteToolCallsOptions{
		NameMap: *req.NameMap, UserID: owner.ID, ConnectionID: req.ConnectionID, Mode: req.Mode,
		PollMs: req.PollMs, TimeoutMs: req.TimeoutMs,
	}
	// Bound every call's wait by what the server allows.
	if max := int(s.opts.MaxWait / time.Millisecond); opts.TimeoutMs <= 0 || opts.TimeoutMs > max {
		opts.TimeoutMs = max
	}
	calls := req.Calls
	if len(calls) == 0 || string(calls) == "null" {
		calls = json.RawMessage("[]")
	}
	switch strings.ToLower(req.Provider) {
	case "anthropic":
		var cs []catalog.AnthropicToolCall
		if err := json.Unmarshal(calls, &cs); err != nil {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "calls: want Anthropic tool_use blocks: " + err.Error()})
			return
		}
		if err := s.checkToolCalls(len(cs)); err != nil {
			writeError(w, err)
			return
		}
		res := catalog.ExecuteAnthropicToolCalls(r.Context(), exec, cs, opts)
		httpjson.Write(w, http.StatusOK, ToolCallsResponse{Provider: "anthropic", Results: res})
	case "openai":
		cs, err := catalog.DecodeOpenAIToolCalls(calls)
		if err != nil {
			writeError(w, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "calls: want Chat Completions tool calls: " + err.Error()})
			return
		}
		if err := s.checkToolCalls(len(cs)); err != nil {
			writeError(w, err)
			return
		}
		res := catalog.ExecuteOpenAIToolCalls(r.Context(), exec, cs, opts)
		httpjson.Write(w, http.StatusOK, ToolCallsResponse{Provider: "openai", Results: res})
	default:
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: fmt.Sprintf("provider %q: want anthropic or openai", req.Provider)})
	}
}

// CodeTooManyCalls refuses an executeToolCalls request with more calls
// than Options.MaxToolCalls (400).
const CodeTooManyCalls = "too_many_calls"

// checkToolCalls refuses a request of n calls over the cap, before any
// starts: every call is an execution, all started at once.
func (s *Service) checkToolCalls(n int) error {
	if max := s.opts.MaxToolCalls; max > 0 && n > max {
		return &Error{Status: http.StatusBadRequest, Code: CodeTooManyCalls, Message: fmt.Sprintf(
			"%d tool calls in one request; the limit is %d: send them in requests of at most %d (the server's limit is set by eve serve --max-tool-calls, env EVE_MAX_TOOL_CALLS, or toolsapi.Options.MaxToolCalls)", n, max, max)}
	}
	return nil
}

// authorized describes an execution the caller may see: one of a
// principal it may act for, id and type alike (404 otherwise, so a
// caller learns nothing of others' executions).
func (s *Service) authorized(r *http.Request, id string) (executions.State, error) {
	// The id's format first, before any Temporal call: a malformed id is
	// 400, another kind of id (a session's, a turn's) unknown as any.
	switch err := signals.CheckExecutionID(id); {
	case errors.Is(err, signals.ErrMalformedID):
		return executions.State{}, &Error{Status: http.StatusBadRequest, Code: "invalid_id", Message: "the execution id in the URL is malformed: an execution id is exec_ followed by letters, digits, '_' or '-'"}
	case err != nil:
		return executions.State{}, notFound(id)
	}
	d, _, err := s.describe(r.Context(), id, "")
	if err != nil {
		return d, err
	}
	if s.opts.Caller != nil && !MayAccess(s.caller(r), d.Owner()) {
		return executions.State{}, notFound(id)
	}
	return d, nil
}

func (s *Service) handleExecution(w http.ResponseWriter, r *http.Request) {
	d, err := s.authorized(r, r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	httpjson.Write(w, http.StatusOK, d.Result)
}

func (s *Service) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.authorized(r, id); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Cancel(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if !res.Status.Terminal() {
		status = http.StatusAccepted
	}
	httpjson.Write(w, status, res)
}

// decode reads a JSON body into v; it answers the error itself. Every
// route with a body takes exactly one JSON value as application/json: a
// cross-site page's "simple" request (text/plain, or no type) is refused
// before anything runs, and so is a missing body.
func (s *Service) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if !httpbody.IsJSON(r.Header.Get("Content-Type")) {
		httpbody.Refusing(w, r)
		writeError(w, &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type", Message: "send the body as JSON with Content-Type: application/json"})
		return false
	}
	if !httpbody.HasBody(r) {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "the request body is empty: send a JSON object"})
		return false
	}
	r = httpbody.Deadline(w, r, httpbody.DefaultReadTimeout)
	body, err := httpbody.Read(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		e := &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: err.Error()}
		switch {
		case errors.Is(err, httpbody.ErrTooLarge):
			e.Status, e.Code = http.StatusRequestEntityTooLarge, "payload_too_large"
		case errors.Is(err, httpbody.ErrTimeout):
			e.Status, e.Code = http.StatusRequestTimeout, "request_timeout"
		}
		writeError(w, e)
		return false
	}
	if httpbody.Empty(body) {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "the request body is empty: send a JSON object"})
		return false
	}
	if err := httpbody.DecodeOne(body, v); err != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "body is not valid JSON for this request: " + err.Error()})
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, err error) {
	var (
		e  *Error
		rt *RunTimeoutError
	)
	switch {
	case errors.As(err, &e):
		httpjson.Write(w, e.Status, e)
	case errors.As(err, &rt):
		httpjson.Write(w, http.StatusGatewayTimeout, &Error{Code: "run_timeout", Message: rt.Error(), Tool: rt.Tool, ExecutionID: rt.ExecutionID, ExecStatus: rt.Status})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		httpjson.Write(w, http.StatusServiceUnavailable, &Error{Code: "unavailable", Message: "the request ended before an answer: " + err.Error()})
	default:
		httpjson.Write(w, http.StatusInternalServerError, &Error{Code: "internal_error", Message: err.Error()})
	}
}
