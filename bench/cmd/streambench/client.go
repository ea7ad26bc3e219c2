package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eve-temporal/eve/protocol"
)

// The stream clients run in child processes (this binary with -client), so
// that the API server's process holds only its own end of each connection:
// 10,000 streams need 10,000 sockets there and 10,000 more in the clients,
// and one process's open-file limit (ulimit -n) would not fit both.
//
// Protocol between the processes, one line each:
//
//	parent → child (stdin):  a session id per line, then EOF
//	child → parent (stdout): "ready N R" once N streams are open (after R
//	                           retries of opens answered 503 or 429);
//	                         "done SESSION DELIVERY LAG" for each turn.completed
//	                           (LAG: µs from the event's meta.at to its arrival);
//	                         "lost SESSION REASON" when a stream ends;
//	                         "error REASON" if the streams cannot be opened.

// clientOpenConcurrency bounds the streams a client opens at once (each open
// reads the session once).
const clientOpenConcurrency = 64

// runClient is the child: it follows one stream per session id read from
// stdin, from each session's tail, until it is killed.
func runClient(url string) {
	raiseFileLimit()
	var ids []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			ids = append(ids, id)
		}
	}
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(ids), DisableCompression: true}}
	opened := make(chan error, len(ids))
	sem := make(chan struct{}, clientOpenConcurrency)
	for _, id := range ids {
		go func() {
			sem <- struct{}{}
			resp, err := openStream(context.Background(), hc, url, id)
			<-sem
			opened <- err
			if err != nil {
				return
			}
			defer resp.Body.Close()
			reason := follow(resp.Body, func(e protocol.Event) {
				if e.Type == protocol.TurnCompleted && len(e.Meta.DeliveryIDs) > 0 {
					// How long after the event was recorded it arrived
					// (meta.at is the time of the workflow task that
					// recorded it; same machine, same clock).
					lag := int64(-1)
					if at, err := time.Parse(time.RFC3339Nano, e.Meta.At); err == nil {
						lag = time.Since(at).Microseconds()
					}
					out.printf("done %s %s %d", id, e.Meta.DeliveryIDs[0], lag)
				}
			})
			out.printf("lost %s %s", id, reason)
		}()
	}
	for range ids {
		if err := <-opened; err != nil {
			out.printf("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
			os.Exit(1)
		}
	}
	out.printf("ready %d %d", len(ids), retried.Load())
	select {} // until the parent kills this process
}

// openRetries bounds the retries of a stream answered 503 or 429 (an
// overloaded server, as the poll mode makes it), as eve's client retries.
const openRetries = 10

// retried counts the retries of all opens in this client.
var retried atomic.Int64

func openStream(ctx context.Context, hc *http.Client, url, id string) (*http.Response, error) {
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, "GET", url+"/eve/v1/session/"+id+"/stream?startIndex=-1", nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", id, err)
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		resp.Body.Close()
		if (resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests) || try == openRetries {
			return nil, fmt.Errorf("stream %s: %s", id, resp.Status)
		}
		retried.Add(1)
		wait := time.Second
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			wait = time.Duration(min(n, 5)) * time.Second
		}
		time.Sleep(wait)
	}
}

// follow reads NDJSON events until the body ends and says why it ended.
func follow(body io.Reader, fn func(protocol.Event)) string {
	sc := bufio.NewScanner(body)
	// Small to start with: 10,000 idle streams should not hold 10,000
	// large buffers; the scanner grows one when a long line arrives.
	sc.Buffer(make([]byte, 0, 4<<10), 4<<20)
	for sc.Scan() {
		var e protocol.Event
		if len(sc.Bytes()) > 0 && json.Unmarshal(sc.Bytes(), &e) == nil {
			fn(e)
		}
	}
	if err := sc.Err(); err != nil {
		return strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "end of body"
}

type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
	l.w.Flush()
}

// clientProc is a running child, seen from the parent.
type clientProc struct {
	cmd     *exec.Cmd
	ready   chan error
	retries int // opens answered 503 or 429 and retried
}

// startClient starts a child following ids' streams on url; lines it
// prints other than "ready" and "error" go to onLine.
func startClient(ctx context.Context, url string, ids []string, onLine func(kind, session, rest string)) (*clientProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-client", url)
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	cmd.Stderr = os.Stderr
	// The clients die with the parent, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start stream client: %w", err)
	}
	p := &clientProc{cmd: cmd, ready: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			kind, rest, _ := strings.Cut(sc.Text(), " ")
			switch kind {
			case "ready":
				if _, r, ok := strings.Cut(rest, " "); ok {
					p.retries, _ = strconv.Atoi(r)
				}
				p.signal(nil)
			case "error":
				p.signal(fmt.Errorf("stream client: %s", rest))
			default:
				session, rest, _ := strings.Cut(rest, " ")
				onLine(kind, session, rest)
			}
		}
		p.signal(fmt.Errorf("stream client exited before its streams were open"))
	}()
	return p, nil
}

// signal reports the first of ready, error or exit.
func (p *clientProc) signal(err error) {
	select {
	case p.ready <- err:
	default:
	}
}

// stop kills the child and waits for it.
func (p *clientProc) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}
