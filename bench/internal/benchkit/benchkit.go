// Package benchkit measures latency and throughput of a function and prints
// the results as an aligned table. cmd/bench and the Go benchmarks use it.
package benchkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// Stats summarizes N timed calls.
type Stats struct {
	N int
	// P50, P99 and Mean are per-call latencies.
	P50, P99, Mean time.Duration
	// PerSec is completed calls per second of wall time; Wall is that time
	// (see ThroughputFor for the budgeted case).
	PerSec float64
	Wall   time.Duration
	// Errors counts failed calls (measured runs stop at the first error, so
	// this is 0 or 1 unless a Throughput run tolerated more).
	Errors int
}

func (s Stats) String() string {
	return fmt.Sprintf("n=%d p50=%s p99=%s mean=%s %.1f/s", s.N, FormatDuration(s.P50), FormatDuration(s.P99), FormatDuration(s.Mean), s.PerSec)
}

// Summarize computes Stats from per-call latencies and the wall time they took.
func Summarize(lat []time.Duration, wall time.Duration) Stats {
	st := Stats{N: len(lat)}
	if len(lat) == 0 {
		return st
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	st.P50 = Percentile(sorted, 50)
	st.P99 = Percentile(sorted, 99)
	st.Mean = sum / time.Duration(len(sorted))
	if wall > 0 {
		st.PerSec = float64(len(sorted)) / wall.Seconds()
		st.Wall = wall
	}
	return st
}

// Percentile returns the p-th percentile (nearest rank) of sorted latencies.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// ErrStop, returned by a measured function, ends a Latency or Timed run early
// without an error (the call that returned it is not counted). Use it for a
// time budget.
var ErrStop = errors.New("benchkit: stop")

// Latency calls fn warmup times untimed, then n times one after another,
// timing each call. i counts from 0 across warm-up and measured calls. It
// stops at the first error (or early, without error, at ErrStop).
func Latency(ctx context.Context, n, warmup int, fn func(ctx context.Context, i int) error) (Stats, error) {
	return Timed(ctx, n, warmup, func(ctx context.Context, i int) (time.Duration, error) {
		return 0, fn(ctx, i)
	})
}

// Timed is Latency for functions that time themselves: a positive duration
// returned by fn is recorded instead of the call's wall time (for example the
// "respond → done" part of a call that first sets a workflow up). PerSec is
// still calls per second of wall time.
func Timed(ctx context.Context, n, warmup int, fn func(ctx context.Context, i int) (time.Duration, error)) (Stats, error) {
	for i := 0; i < warmup; i++ {
		if _, err := fn(ctx, i); err != nil {
			if errors.Is(err, ErrStop) {
				break
			}
			return Stats{}, fmt.Errorf("warm-up call %d: %w", i, err)
		}
	}
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return Summarize(lat, time.Since(start)), err
		}
		t0 := time.Now()
		d, err := fn(ctx, warmup+i)
		wall := time.Since(t0)
		if errors.Is(err, ErrStop) {
			break
		}
		if err != nil {
			st := Summarize(lat, time.Since(start))
			st.Errors = 1
			return st, fmt.Errorf("call %d: %w", warmup+i, err)
		}
		if d <= 0 {
			d = wall
		}
		lat = append(lat, d)
	}
	return Summarize(lat, time.Since(start)), nil
}

// Throughput calls fn total times from concurrency goroutines and reports
// calls per second of wall time (and per-call latency under that load). i
// counts from 0 to total-1. The first error cancels the rest and is returned.
func Throughput(ctx context.Context, concurrency, total int, fn func(ctx context.Context, i int) error) (Stats, error) {
	return ThroughputFor(ctx, concurrency, total, 0, fn)
}

// ThroughputFor is Throughput with a time budget: after maxWall (if > 0) no
// new calls start and the calls in flight finish. If the budget cut the run
// short, PerSec counts only the calls that completed within maxWall (so the
// drain, at falling concurrency, does not dilute it); the latencies cover all
// completed calls.
func ThroughputFor(ctx context.Context, concurrency, total int, maxWall time.Duration, fn func(ctx context.Context, i int) error) (Stats, error) {
	if concurrency < 1 {
		concurrency = 1
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		next     atomic.Int64
		mu       sync.Mutex
		lat      = make([]time.Duration, 0, total)
		errCount int
		inWindow int
		wg       sync.WaitGroup
	)
	start := time.Now()
	var stopAt time.Time
	if maxWall > 0 {
		stopAt = start.Add(maxWall)
	}
	var capped atomic.Bool
	for g := 0; g < concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if !stopAt.IsZero() && time.Now().After(stopAt) {
					capped.Store(true)
					return
				}
				i := int(next.Add(1) - 1)
				if i >= total || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := fn(ctx, i)
				d := time.Since(t0)
				mu.Lock()
				if err != nil {
					errCount++
					mu.Unlock()
					cancel(fmt.Errorf("call %d: %w", i, err))
					return
				}
				lat = append(lat, d)
				if stopAt.IsZero() || !t0.Add(d).After(stopAt) {
					inWindow++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := Summarize(lat, time.Since(start))
	st.Errors = errCount
	if capped.Load() {
		st.PerSec = float64(inWindow) / maxWall.Seconds()
		st.Wall = maxWall
	}
	if errCount > 0 || ctx.Err() != nil {
		return st, context.Cause(ctx)
	}
	if st.N < total && !capped.Load() {
		return st, errors.New("benchkit: fewer calls completed than asked for")
	}
	return st, nil
}

// Row is one line of a Table.
type Row struct {
	Scenario string
	Config   string
	// Latency is from sequential calls; Throughput from concurrent ones
	// (only its PerSec is shown). Either may be zero (shown as "-").
	Latency    Stats
	Throughput Stats
	// Baseline names the row (by Scenario, and Config if given as
	// "scenario@config") whose p50 this row is compared with; "" shows no ratio.
	Baseline string
	// Note is free text shown last (an error, say).
	Note string
}

// Table prints rows as aligned columns: scenario, config, p50, p99, turns/s,
// and the ratios of p50 and of turns/s to the baseline's.
type Table struct {
	Rows []Row
	// Unit names what a call is in the throughput header; default "turns".
	Unit string
}

// Add appends a row.
func (t *Table) Add(r Row) { t.Rows = append(t.Rows, r) }

// Fprint writes the table to w.
func (t *Table) Fprint(w io.Writer) error {
	unit := t.Unit
	if unit == "" {
		unit = "turns"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tconfig\tp50\tp99\t%s/s\tvs baseline: p50\t%s/s\tnote\t\n", unit, unit)
	for _, r := range t.Rows {
		p50, p99 := "-", "-"
		if r.Latency.N > 0 {
			p50, p99 = FormatDuration(r.Latency.P50), FormatDuration(r.Latency.P99)
		}
		tput := "-"
		if r.Throughput.N > 0 {
			tput = fmt.Sprintf("%.1f", r.Throughput.PerSec)
		}
		ratio, tratio := "", ""
		if b, ok := t.find(r.Baseline, r.Config); ok {
			if b.Latency.P50 > 0 && r.Latency.N > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(r.Latency.P50)/float64(b.Latency.P50))
			}
			if b.Throughput.PerSec > 0 && r.Throughput.N > 0 {
				tratio = fmt.Sprintf("%.2fx", r.Throughput.PerSec/b.Throughput.PerSec)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Config, p50, p99, tput, ratio, tratio, r.Note)
	}
	return tw.Flush()
}

// String renders the table.
func (t *Table) String() string {
	var b strings.Builder
	_ = t.Fprint(&b)
	return b.String()
}

// find looks a baseline up as "scenario@config", or "scenario" in config.
func (t *Table) find(baseline, config string) (Row, bool) {
	if baseline == "" {
		return Row{}, false
	}
	scen, cfg, ok := strings.Cut(baseline, "@")
	if !ok {
		cfg = config
	}
	for _, r := range t.Rows {
		if r.Scenario == scen && r.Config == cfg {
			return r, true
		}
	}
	return Row{}, false
}

// FormatDuration prints d with three significant digits in a fitting unit
// (e.g. 812µs, 7.94ms, 352ms, 2.10s).
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return sig3(float64(d)/float64(time.Microsecond)) + "µs"
	case d < time.Second:
		return sig3(float64(d)/float64(time.Millisecond)) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
