package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/tools"
)

// BenchmarkStreamLatency measures how long a new event takes to reach an
// open HTTP stream (the eve client's view), against the raw time it
// becomes readable from the workflows (a tight query loop beside it).
// One op is one turn of four model steps with three 100 ms tool calls
// between them, so events arrive in separate batches. Metrics:
//
//	stream-p50-ms, stream-p95-ms  stream arrival − first seen by the raw poller
//	record-p50-ms, record-p95-ms  raw poller − meta.at (workflow time at emit)
//	e2e-p50-ms                    stream arrival − meta.at
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
	e := newAPIEnv(b, env, func(o *api.Options) { o.PollInterval = api.DefaultPollInterval })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var stream, record, e2e []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id, err := e.C.Create(ctx)
		if err != nil {
			b.Fatal(err)
		}
		// Wait until session.started is readable, so both readers start level.
		if _, _, err := e.C.Events(ctx, id, 0); err != nil {
			b.Fatal(err)
		}
		var (
			mu       sync.Mutex
			rawSeen  = map[string]time.Time{}
			wg       sync.WaitGroup
			streamAt = map[string]time.Time{}
			evs      []protocol.Event
		)
		sctx, stop := context.WithCancel(ctx)
		wg.Add(2)
		go func() { // the raw poller: Read in a tight loop
			defer wg.Done()
			cursor := 1
			for sctx.Err() == nil {
				p, err := env.Sessions.Read(sctx, id, cursor)
				if err != nil {
					continue
				}
				now := time.Now()
				mu.Lock()
				for _, ev := range p.Events {
					if _, ok := rawSeen[ev.Meta.ID]; !ok {
						rawSeen[ev.Meta.ID] = now
					}
				}
				mu.Unlock()
				cursor += len(p.Events)
			}
		}()
		st := e.C.Stream(sctx, id, 1, nil)
		go func() {
			defer wg.Done()
			for st.Next() {
				now := time.Now()
				ev := st.Event()
				mu.Lock()
				streamAt[ev.Meta.ID] = now
				evs = append(evs, ev)
				mu.Unlock()
				if ev.Type == protocol.SessionWaiting {
					return
				}
			}
		}()
		time.Sleep(50 * time.Millisecond)
		if _, err := e.C.Send(ctx, id, "go"); err != nil {
			b.Fatal(err)
		}
		waitDone := make(chan struct{})
		go func() {
			for {
				mu.Lock()
				n := len(evs)
				done := n > 0 && evs[n-1].Type == protocol.SessionWaiting
				mu.Unlock()
				if done {
					close(waitDone)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		select {
		case <-waitDone:
		case <-time.After(60 * time.Second):
			b.Fatal("the turn did not finish")
		}
		time.Sleep(20 * time.Millisecond) // let the raw poller see the last batch
		stop()
		wg.Wait()
		for _, ev := range evs {
			at, err := time.Parse(time.RFC3339Nano, ev.Meta.At)
			if err != nil {
				b.Fatal(err)
			}
			s := streamAt[ev.Meta.ID]
			e2e = append(e2e, ms(s.Sub(at)))
			if r, ok := rawSeen[ev.Meta.ID]; ok {
				stream = append(stream, ms(s.Sub(r)))
				record = append(record, ms(r.Sub(at)))
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(pct(stream, 50), "stream-p50-ms")
	b.ReportMetric(pct(stream, 95), "stream-p95-ms")
	b.ReportMetric(pct(record, 50), "record-p50-ms")
	b.ReportMetric(pct(record, 95), "record-p95-ms")
	b.ReportMetric(pct(e2e, 50), "e2e-p50-ms")
	b.ReportMetric(pct(e2e, 95), "e2e-p95-ms")
	b.Logf("events %d: stream−raw p50 %.1f p95 %.1f ms; raw−recorded p50 %.1f p95 %.1f ms; stream−recorded p50 %.1f p95 %.1f ms (poll %v)",
		len(e2e), pct(stream, 50), pct(stream, 95), pct(record, 50), pct(record, 95), pct(e2e, 50), pct(e2e, 95), api.DefaultPollInterval)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
