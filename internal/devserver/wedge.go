package devserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// The dev server keeps its state in SQLite over one connection
// (go.temporal.io/server's sqlite plugin, on modernc.org/sqlite). A
// request cancelled at the wrong moment leaves that connection's
// interrupt flag set while a statement is still active, and from then on
// every query fails with "interrupted (9)": the namespace is "not found",
// workers cannot start, and the server never recovers by itself (seen
// under the e2e suite's load, minutes into a run). Dial's clients keep
// their cancellations from the server (shield.go), which prevents it; any
// other client can still wedge it. A server with a DB file loses nothing
// by a restart, so Server restarts it on the same ports when its log
// shows the wedge.

// wedgeSignature is what every query of a wedged server logs.
var wedgeSignature = []byte("interrupted (9)")

// Wedge detection: this many failed queries within wedgeWindow. A
// cancelled query's stray interrupt fails one or two statements; a wedged
// server fails every one, dozens a second.
const (
	wedgeLines  = 40
	wedgeWindow = 3 * time.Second
)

// wedgeDetector scans the server's log for the wedge and calls wedged
// once per burst.
type wedgeDetector struct {
	mu     sync.Mutex
	now    func() time.Time
	times  []time.Time
	rest   []byte
	wedged func()
}

func (d *wedgeDetector) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	buf := append(d.rest, p...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		if bytes.Contains(buf[:i], wedgeSignature) {
			d.hit()
		}
		buf = buf[i+1:]
	}
	if len(buf) > 64<<10 { // a line that never ends
		buf = buf[len(buf)-len(wedgeSignature):]
	}
	d.rest = append(d.rest[:0], buf...)
	return len(p), nil
}

func (d *wedgeDetector) hit() {
	t := d.now()
	d.times = append(d.times, t)
	for len(d.times) > 0 && t.Sub(d.times[0]) > wedgeWindow {
		d.times = d.times[1:]
	}
	if len(d.times) >= wedgeLines {
		d.times = d.times[:0]
		go d.wedged()
	}
}

// heal restarts a wedged server (one with a DB file) on the same ports,
// once at a time, and says so on the server's stderr.
func (s *Server) heal() {
	if !s.healing.TryLock() {
		return
	}
	defer s.healing.Unlock()
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return
	}
	w := writerOrDiscard(s.opts.Stderr)
	fmt.Fprintf(w, "devserver: the server at %s is wedged (every SQLite query fails with %q); restarting it on the same ports with its state\n", s.Addr, wedgeSignature)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Restart(ctx); err != nil {
		fmt.Fprintf(w, "devserver: restarting the wedged server failed: %v\n", err)
		return
	}
	s.mu.Lock()
	s.heals++
	s.mu.Unlock()
	fmt.Fprintf(w, "devserver: the server at %s is back\n", s.Addr)
}

// Heals counts the restarts of a wedged server (see wedge.go).
func (s *Server) Heals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heals
}

func (s *Server) stderr(o Options) io.Writer {
	ws := []io.Writer{s.logs, writerOrDiscard(o.Stderr)}
	if o.DBFile != "" {
		ws = append(ws, &wedgeDetector{now: time.Now, wedged: s.heal})
	}
	return io.MultiWriter(ws...)
}
