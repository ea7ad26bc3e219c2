// Package jaegertest runs a real Jaeger (all in one: an OTLP/HTTP
// receiver, in-memory storage, the query API) for tests, on free loopback
// ports, and reads traces back through its query API. `make bin/jaeger`
// builds the binary from the Go module proxy; EVE_JAEGER_BIN names
// another. Without one the test is skipped, unless EVE_REQUIRE_JAEGER=1
// (make test sets it), when it fails.
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BinaryEnv names the Jaeger binary to run.
const BinaryEnv = "EVE_JAEGER_BIN"

// Jaeger is a running Jaeger.
type Jaeger struct {
	// OTLPEndpoint is its OTLP/HTTP receiver, for
	// OTEL_EXPORTER_OTLP_ENDPOINT (http://127.0.0.1:port).
	OTLPEndpoint string
	// OTLPGRPCEndpoint is its OTLP/gRPC receiver (http://127.0.0.1:port,
	// plaintext), for OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
	OTLPGRPCEndpoint string
	// Query is its query API (http://127.0.0.1:port).
	Query string
}

// findBinary returns $EVE_JAEGER_BIN, or bin/jaeger in the nearest module
// root at or above the working directory that has one.
func findBinary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", BinaryEnv, p, err)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			bin := filepath.Join(dir, "bin", "jaeger")
			if st, err := os.Stat(bin); err == nil && !st.IsDir() {
				return bin, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", errors.New("no bin/jaeger at or above " + wd + ": run `make bin/jaeger` (builds Jaeger from the Go module proxy), or set " + BinaryEnv)
		}
	}
}

// givenPorts are the ports freePort handed out: the kernel may offer a
// port again once its listener closed, and Jaeger needs four at once.
var givenPorts sync.Map

func freePort() (int, error) {
	for {
		port, err := anyPort()
		if err != nil {
			return 0, err
		}
		if _, taken := givenPorts.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
}

func anyPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
      grpc:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Start runs a Jaeger for the test, stopped when it ends.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		if os.Getenv("EVE_REQUIRE_JAEGER") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	j, stop, err := Run(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return j
}

// Find returns the Jaeger binary: $EVE_JAEGER_BIN, or bin/jaeger in the
// nearest module root at or above the working directory that has one.
func Find() (string, error) { return findBinary() }

// Run starts the Jaeger binary bin on free loopback ports, its config in
// dir, and returns once it answers; stop ends it.
func Run(bin, dir string) (j *Jaeger, stop func(), err error) {
	var ports [4]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, nil, err
		}
	}
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, ports[0], ports[1], ports[2], ports[3]), 0o600); err != nil {
		return nil, nil, err
	}
	logs := &syncBuffer{}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop = func() {
		cmd.Process.Kill()
		<-exited
	}
	j = &Jaeger{OTLPEndpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[2]), OTLPGRPCEndpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[3]), Query: fmt.Sprintf("http://127.0.0.1:%d", ports[0])}
	// Ready when the query API answers and the receiver accepts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			return nil, nil, fmt.Errorf("jaeger exited: %s", logs.String())
		default:
		}
		if j.ready() {
			return j, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("jaeger not ready after 60s: %s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// syncBuffer is Jaeger's output, written by its process's copiers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (j *Jaeger) ready() bool {
	for _, u := range []string{j.Query + "/api/services", j.OTLPEndpoint + "/v1/traces"} {
		resp, err := http.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
	}
	return true
}

// Trace is a trace as the query API returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is a span as the query API returns it (times in microseconds).
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// Reference is a parent (CHILD_OF) or a link (FOLLOWS_FROM).
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// KeyValue is a tag.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the emitting service.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// Tag returns a span's tag value as text, and whether it has it.
func (s Span) Tag(key string) (string, bool) {
	for _, kv := range s.Tags {
		if kv.Key == key {
			switch v := kv.Value.(type) {
			case string:
				return v, true
			default:
				b, _ := json.Marshal(v)
				return string(b), true
			}
		}
	}
	return "", false
}

// Parent is the span's parent's id ("" for a root).
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Traces returns the service's traces (up to limit).
func (j *Jaeger) Traces(ctx context.Context, service string, limit int) ([]Trace, error) {
	q := url.Values{"service": {service}, "limit": {fmt.Sprint(limit)}, "lookback": {"1h"}}
	var out struct {
		Data []Trace `json:"data"`
	}
	if err := j.get(ctx, "/api/traces?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Trace returns one trace by id, or false when Jaeger has none.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (Trace, bool, error) {
	var out struct {
		Data []Trace `json:"data"`
	}
	err := j.get(ctx, "/api/traces/"+url.PathEscape(traceID), &out)
	var nf notFound
	if errors.As(err, &nf) {
		return Trace{}, false, nil
	}
	if err != nil || len(out.Data) == 0 {
		return Trace{}, false, err
	}
	return out.Data[0], true, nil
}

type notFound struct{ error }

func (j *Jaeger) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return notFound{fmt.Errorf("GET %s: 404 %s", path, strings.TrimSpace(string(body)))}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, v)
}
