package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/connections"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// slowResearchHook is a Node module hook that makes the reference
// server's simulate-research-query last 30 s (four stages of 7.5 s
// instead of 1 s), failing loudly if the server's code changed.
const slowResearchHook = `import { registerHooks } from 'node:module';
registerHooks({
  load(url, context, nextLoad) {
    const r = nextLoad(url, context);
    if (url.endsWith('/tools/simulate-research-query.js')) {
      const src = String(r.source);
      const slowed = src.replace('const STAGE_DURATION = 1000;', 'const STAGE_DURATION = 7500;');
      if (slowed === src) throw new Error('simulate-research-query.js has no "const STAGE_DURATION = 1000;" to slow down');
      return { ...r, source: slowed };
    }
    return r;
  },
});
`

// lastStage is the status message of the research task's last stage,
// 22.5 s into its 30 s.
const lastStage = "Generating report"

// A turn cancelled while the reference server's research task works (in
// its last stage, 7.5 s before it would finish) cancels the task on the
// server: the call learns of the cancel within about a second (it
// heartbeats past Temporal's throttling while it waits), not at its next
// throttled heartbeat (16 s), and sends tasks/cancel, which the server
// answers with the task cancelled, not "terminal status: completed".
func TestConnectionMCPTaskCancelWhileWorking(t *testing.T) {
	node, dir := connectionServers(t)
	script := filepath.Join(dir, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	hook := filepath.Join(t.TempDir(), "slow-research.mjs")
	if err := os.WriteFile(hook, []byte(slowResearchHook), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			tap := &rpcTap{}
			conn := &connections.Connection{Name: "everything", Allow: []string{"simulate-research-query"}}
			switch transport {
			case "http":
				port := freePort(t)
				startServer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, node, "--import", hook, script, "streamableHttp")
				proxy := httptest.NewServer(tap.proxy(fmt.Sprintf("http://127.0.0.1:%d", port)))
				t.Cleanup(proxy.Close)
				conn.MCP = &connections.MCP{URL: proxy.URL + "/mcp"}
			case "stdio":
				// The process's stdin and stdout are copied to files the
				// tap reads.
				logs := t.TempDir()
				tap.files = [2]string{filepath.Join(logs, "in.jsonl"), filepath.Join(logs, "out.jsonl")}
				conn.MCP = &connections.MCP{Command: "sh", Args: []string{"-c", `tee -a "$0" | "$1" --import "$2" "$3" stdio | tee -a "$4"`,
					tap.files[0], node, hook, script, tap.files[1]}}
			}
			set, err := connections.Static(conn)
			if err != nil {
				t.Fatal(err)
			}
			env := evetest.New(t)
			env.StartWorker(connectionAgent(t, taskRules, set))
			ctx := env.Ctx(3 * time.Minute)
			sid := mustSession(t, env)
			if _, err := env.Sessions.Send(ctx, sid, signals.SendRequest{Message: "research"}); err != nil {
				t.Fatal(err)
			}
			tap.waitFor(t, 90*time.Second, "the task's last stage", func() bool {
				return slices.ContainsFunc(tap.snapshot(false), func(m tapMsg) bool { return strings.Contains(string(m.Result), lastStage) })
			})
			asked := time.Now()
			if res, err := env.Sessions.Control(ctx, sid, signals.ControlRequest{Op: signals.ControlCancel}); err != nil || res.Status != signals.ControlAccepted {
				t.Fatalf("cancel: %+v %v", res, err)
			}
			var cancel tapMsg
			tap.waitFor(t, 60*time.Second, "tasks/cancel", func() bool {
				i := slices.IndexFunc(tap.snapshot(true), func(m tapMsg) bool { return m.Method == "tasks/cancel" })
				if i >= 0 {
					cancel = tap.snapshot(true)[i]
				}
				return i >= 0
			})
			t.Logf("tasks/cancel reached the server %v after the turn was cancelled", cancel.At.Sub(asked).Round(10*time.Millisecond))
			var answer tapMsg
			tap.waitFor(t, 30*time.Second, "the answer to tasks/cancel", func() bool {
				i := slices.IndexFunc(tap.snapshot(false), func(m tapMsg) bool { return bytes.Equal(m.ID, cancel.ID) })
				if i >= 0 {
					answer = tap.snapshot(false)[i]
				}
				return i >= 0
			})
			var task struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(answer.Result, &task)
			if task.Status != "cancelled" {
				t.Fatalf("the server's answer to tasks/cancel: result %s, error %s; want the task cancelled while it worked", answer.Result, answer.Error)
			}
			evs := env.WaitIdle(sid)
			if !slices.ContainsFunc(evs, func(e protocol.Event) bool { return e.Type == protocol.TurnCancelled }) {
				t.Fatalf("events: %s", evetest.Join(evs))
			}
			if slices.ContainsFunc(tap.snapshot(true), func(m tapMsg) bool { return m.Method == "tasks/result" }) {
				t.Fatalf("the cancelled call read the task's result: %v", tap.methods())
			}
		})
	}
}

// rpcTap records the JSON-RPC messages between eve and an MCP server:
// what eve sent and what the server answered, each when the tap saw it.
// Over streamable HTTP it is a proxy; over stdio it reads the files the
// process's input and output are copied to.
type rpcTap struct {
	mu             sync.Mutex
	sent, received []tapMsg
	files          [2]string // stdio: eve's messages, the server's
	read           [2]int    // bytes of each file read
}

type tapMsg struct {
	At     time.Time
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// add records the messages of complete lines: JSON lines, or an event
// stream's data lines.
func (tp *rpcTap) add(sent bool, text []byte) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.addLocked(sent, text)
}

func (tp *rpcTap) addLocked(sent bool, text []byte) {
	now := time.Now()
	for _, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(line), []byte("data:")))
		var msgs []tapMsg
		if bytes.HasPrefix(line, []byte("[")) {
			_ = json.Unmarshal(line, &msgs)
		} else {
			var m tapMsg
			if json.Unmarshal(line, &m) == nil {
				msgs = append(msgs, m)
			}
		}
		for _, m := range msgs {
			m.At = now
			if sent {
				tp.sent = append(tp.sent, m)
			} else {
				tp.received = append(tp.received, m)
			}
		}
	}
}

// snapshot returns what eve sent (sent) or the server answered so far.
func (tp *rpcTap) snapshot(sent bool) []tapMsg {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for i, f := range tp.files {
		if f == "" {
			continue
		}
		b, _ := os.ReadFile(f)
		// Only complete lines: a line being written is read next time.
		end := bytes.LastIndexByte(b, '\n') + 1
		if end > tp.read[i] {
			tp.addLocked(i == 0, b[tp.read[i]:end])
			tp.read[i] = end
		}
	}
	if sent {
		return slices.Clone(tp.sent)
	}
	return slices.Clone(tp.received)
}

func (tp *rpcTap) methods() []string {
	var out []string
	for _, m := range tp.snapshot(true) {
		out = append(out, m.Method)
	}
	return out
}

// waitFor polls the tap until ok, for at most bound.
func (tp *rpcTap) waitFor(t *testing.T, bound time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; eve sent %v", what, bound, tp.methods())
		}
		time.Sleep(50 * time.Millisecond) // polling the tap's record, not a barrier
	}
}

// proxy forwards to target, recording requests and responses (a
// response's lines as they stream).
func (tp *rpcTap) proxy(target string) http.Handler {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // event streams pass at once
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &tapBody{ReadCloser: resp.Body, tap: tp}
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		tp.add(true, body)
		rp.ServeHTTP(w, r)
	})
}

// tapBody records a response's complete lines as they are read, and the
// rest at its end.
type tapBody struct {
	io.ReadCloser
	tap     *rpcTap
	pending []byte
	once    sync.Once
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.pending = append(b.pending, p[:n]...)
	if i := bytes.LastIndexByte(b.pending, '\n'); i >= 0 {
		b.tap.add(false, b.pending[:i+1])
		b.pending = slices.Clone(b.pending[i+1:])
	}
	if err != nil {
		b.flush()
	}
	return n, err
}

func (b *tapBody) Close() error {
	b.flush()
	return b.ReadCloser.Close()
}

func (b *tapBody) flush() {
	b.once.Do(func() {
		if len(b.pending) > 0 {
			b.tap.add(false, b.pending)
		}
	})
}
