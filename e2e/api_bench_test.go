package e2e

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// BenchmarkStreamLatency measures how long a new event takes to reach an
// open HTTP stream (what eve's client sees), next to the raw time for it to
// become readable from the workflows at all. One op is one turn of four
// model steps with three 100 ms tool calls between them, so events arrive
// in separate batches. Latency is arrival − meta.at (the workflow time of
// the task that emitted the event; same machine, same clock).
//
//	raw:    sessions.Service.ReadNext polled every 1 ms in-process (the
//	        floor: the event is recorded and queryable)
//	stream: GET /eve/v1/session/:id/stream through the Go client, with the
//	        server's default poll interval (EVE_STREAM_POLL overrides it)
//
// The two run one after the other (not side by side) so one does not
// slow the other on a small machine.
func BenchmarkStreamLatency(b *testing.B) {
	env := evetest.New(b)
	pause := &tools.Tool{
		Name: "pause", Description: "Waits 100 ms.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx *tools.Context, _ json.RawMessage) (any, error) {
			time.Sleep(100 * time.Millisecond)
			return map[string]bool{"ok": true}, nil
		},
	}
	env.StartWorker(evetest.Agent(b, `
rules:
  - match: go
    steps:
      - calls: [{tool: pause}]
      - calls: [{tool: pause}]
      - calls: [{tool: pause}]
      - reply: "done"
`, pause))
	poll := api.DefaultPollInterval
	if d, err := time.ParseDuration(os.Getenv("EVE_STREAM_POLL")); err == nil {
		poll = d // to compare intervals: EVE_STREAM_POLL=25ms go test -bench ...
	}
	e := newAPIEnv(b, env, func(o *api.Options) { o.PollInterval = poll })

	b.Run("raw", func(b *testing.B) {
		benchTurns(b, e, func(ctx context.Context, id string, seen func(protocol.Event) bool) {
			cursor := 0
			var prev sessions.Page
			for ctx.Err() == nil {
				p, err := env.Sessions.ReadNext(ctx, id, cursor, prev)
				if err == nil {
					prev = p
					for _, ev := range p.Events {
						if !seen(ev) {
							return
						}
					}
					cursor += len(p.Events)
				}
				time.Sleep(time.Millisecond)
			}
		})
	})
	b.Run("stream", func(b *testing.B) {
		benchTurns(b, e, func(ctx context.Context, id string, seen func(protocol.Event) bool) {
			st := e.C.Stream(ctx, id, 0, nil)
			defer st.Close()
			for st.Next() {
				if !seen(st.Event()) {
					return
				}
			}
		})
	})
}

// benchTurns runs b.N turns, each in a new session read by follow, which
// calls seen for every event until it returns false (after the turn's
// session.waiting), and reports the latency percentiles.
func benchTurns(b *testing.B, e *apiEnv, follow func(ctx context.Context, id string, seen func(protocol.Event) bool)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var lat []float64
	for i := 0; i < b.N; i++ {
		id, err := e.C.Create(ctx)
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan []float64)
		ready := make(chan struct{})
		go func() {
			var out []float64
			follow(ctx, id, func(ev protocol.Event) bool {
				now := time.Now()
				if ev.Type == protocol.SessionStarted {
					close(ready)
					return true
				}
				at, err := time.Parse(time.RFC3339Nano, ev.Meta.At)
				if err == nil {
					out = append(out, float64(now.Sub(at).Microseconds())/1000)
				}
				return ev.Type != protocol.SessionWaiting
			})
			done <- out
		}()
		<-ready
		time.Sleep(20 * time.Millisecond)
		if _, err := e.C.Send(ctx, id, "go"); err != nil {
			b.Fatal(err)
		}
		select {
		case out := <-done:
			lat = append(lat, out...)
		case <-time.After(60 * time.Second):
			b.Fatal("the turn did not finish")
		}
	}
	b.ReportMetric(pct(lat, 50), "p50-ms")
	b.ReportMetric(pct(lat, 95), "p95-ms")
	b.ReportMetric(pct(lat, 99), "p99-ms")
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p/100)]
}
