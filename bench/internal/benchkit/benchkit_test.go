package benchkit

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	st := Summarize(lat, 2*time.Second)
	if st.N != 100 || st.P50 != 50*time.Millisecond || st.P99 != 99*time.Millisecond || st.PerSec != 50 {
		t.Fatalf("Summarize = %+v", st)
	}
	if st.Mean != 50500*time.Microsecond {
		t.Fatalf("Mean = %v", st.Mean)
	}
	if Summarize(nil, time.Second).N != 0 {
		t.Fatal("empty")
	}
}

func TestLatency(t *testing.T) {
	var calls []int
	st, err := Latency(context.Background(), 5, 2, func(ctx context.Context, i int) error {
		calls = append(calls, i)
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil || st.N != 5 || len(calls) != 7 || calls[6] != 6 {
		t.Fatalf("Latency = %+v, %v, calls %v", st, err, calls)
	}
	if st.P50 < time.Millisecond {
		t.Fatalf("P50 = %v", st.P50)
	}
	boom := errors.New("boom")
	_, err = Latency(context.Background(), 5, 0, func(ctx context.Context, i int) error {
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestThroughput(t *testing.T) {
	var n, inflight, peak atomic.Int64
	st, err := Throughput(context.Background(), 10, 100, func(ctx context.Context, i int) error {
		n.Add(1)
		cur := inflight.Add(1)
		for {
			p := peak.Load()
			if cur <= p || peak.CompareAndSwap(p, cur) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inflight.Add(-1)
		return nil
	})
	if err != nil || st.N != 100 || n.Load() != 100 {
		t.Fatalf("Throughput = %+v, %v (calls %d)", st, err, n.Load())
	}
	if peak.Load() < 2 || peak.Load() > 10 {
		t.Fatalf("peak concurrency %d", peak.Load())
	}
	// Every call sleeps at least 5 ms, so 10 workers finish at most 2000 a
	// second, however fast the machine; a slow one only lowers the rate
	// (the peak above shows the calls overlapped).
	if st.PerSec <= 0 || st.PerSec > 2000 {
		t.Fatalf("PerSec = %v, want (0, 2000]", st.PerSec)
	}
	boom := errors.New("boom")
	_, err = Throughput(context.Background(), 4, 100, func(ctx context.Context, i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestTable(t *testing.T) {
	var tb Table
	tb.Add(Row{Scenario: "raw", Config: "fast", Latency: Stats{N: 1, P50: 10 * time.Millisecond, P99: 20 * time.Millisecond}, Throughput: Stats{N: 1, PerSec: 50}})
	tb.Add(Row{Scenario: "eve-turn", Config: "fast", Latency: Stats{N: 1, P50: 15 * time.Millisecond, P99: 30 * time.Millisecond}, Throughput: Stats{N: 1, PerSec: 40}, Baseline: "raw"})
	tb.Add(Row{Scenario: "eve-turn", Config: "default", Latency: Stats{N: 1, P50: 40 * time.Millisecond}, Baseline: "raw@fast", Note: "x"})
	out := tb.String()
	for _, want := range []string{"scenario", "turns/s", "1.50x", "4.00x", "0.80x", "50.0", "10.0ms", "20.0ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	col := strings.Index(lines[0], "p50")
	if strings.Index(lines[1], "10.0ms") != col {
		t.Errorf("columns not aligned:\n%s", out)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		812 * time.Microsecond:  "812µs",
		7940 * time.Microsecond: "7.94ms",
		352 * time.Millisecond:  "352ms",
		2100 * time.Millisecond: "2.10s",
		0:                       "0",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestTimedAndStop(t *testing.T) {
	st, err := Timed(context.Background(), 10, 1, func(ctx context.Context, i int) (time.Duration, error) {
		if i == 6 {
			return 0, ErrStop
		}
		return time.Duration(i) * time.Second, nil
	})
	if err != nil || st.N != 5 || st.P50 != 3*time.Second || st.P99 != 5*time.Second {
		t.Fatalf("Timed = %+v, %v", st, err)
	}
}

// The budget cuts the run short: no call starts after it, and PerSec
// counts only the calls that finished within it. The bounds follow from
// each call's 10 ms sleep, not from the machine's speed: 4 workers finish
// at most 4 × 20 calls within 200 ms (PerSec <= 400) and start at most one
// more each (N <= 84); 1000 calls need far longer than the budget (capped).
// A loaded machine only finishes fewer.
func TestThroughputFor(t *testing.T) {
	const budget = 200 * time.Millisecond
	st, err := ThroughputFor(context.Background(), 4, 1000, budget, func(ctx context.Context, i int) error {
		time.Sleep(10 * time.Millisecond)
		return nil
	})
	if err != nil || st.Wall != budget || st.N > 84 || st.PerSec < 0 || st.PerSec > 400 || st.PerSec*budget.Seconds() > float64(st.N)+0.5 {
		t.Fatalf("ThroughputFor = %+v, %v", st, err)
	}
}
