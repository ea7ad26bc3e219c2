package rawsdk_test

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/bench/rawsdk"
	"github.com/eve-temporal/eve/internal/devserver/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

func startWorker(tb testing.TB) (func(ctx context.Context, v rawsdk.Variant) error, func(ctx context.Context, v rawsdk.Variant) (time.Duration, error)) {
	tb.Helper()
	srv := devtest.Shared(tb)
	c := devtest.Client(tb, srv)
	tq := devtest.TaskQueue(tb)
	w := worker.New(c, tq, worker.Options{})
	rawsdk.RegisterWorker(w)
	if err := w.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Stop)
	return func(ctx context.Context, v rawsdk.Variant) error { return rawsdk.RunTurn(ctx, c, tq, v) },
		func(ctx context.Context, v rawsdk.Variant) (time.Duration, error) {
			return rawsdk.RunPark(ctx, c, tq, v)
		}
}

func TestVariants(t *testing.T) {
	turn, park := startWorker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, v := range rawsdk.Variants {
		if err := turn(ctx, v); err != nil {
			t.Fatalf("turn %s: %v", v, err)
		}
		d, err := park(ctx, v)
		if err != nil {
			t.Fatalf("park %s: %v", v, err)
		}
		t.Logf("%s: respond → done %v", v, d)
	}
}

func BenchmarkTurn(b *testing.B) {
	turn, _ := startWorker(b)
	ctx := context.Background()
	for _, v := range rawsdk.Variants {
		b.Run(string(v), func(b *testing.B) {
			for i := 0; i < 3; i++ { // warm up
				if err := turn(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := turn(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTurnParallel(b *testing.B) {
	turn, _ := startWorker(b)
	ctx := context.Background()
	for _, v := range rawsdk.Variants {
		b.Run(string(v), func(b *testing.B) {
			b.SetParallelism(25) // × GOMAXPROCS goroutines
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := turn(ctx, v); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPark reports the "respond → turn done" latency as ns/op.
func BenchmarkPark(b *testing.B) {
	_, park := startWorker(b)
	ctx := context.Background()
	for _, v := range rawsdk.Variants {
		b.Run(string(v), func(b *testing.B) {
			if _, err := park(ctx, v); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			b.StopTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				d, err := park(ctx, v)
				if err != nil {
					b.Fatal(err)
				}
				total += d
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/op")
		})
	}
}

// Each shape runs a turn through a session, and the session hears its end.
func TestShapes(t *testing.T) {
	srv := devtest.Shared(t)
	c := devtest.Client(t, srv)
	tq := devtest.TaskQueue(t)
	w := worker.New(c, tq, worker.Options{})
	rawsdk.RegisterWorker(w)
	rawsdk.RegisterShapes(w, c)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, shape := range []rawsdk.Shape{rawsdk.ShapeSession, rawsdk.ShapeTurnFirst, rawsdk.ShapeChildTurn} {
		for _, v := range []rawsdk.Variant{rawsdk.Regular, rawsdk.Local} {
			id := rawsdk.NextWorkflowID("shape")
			if err := rawsdk.RunShape(ctx, c, tq, shape, v, id); err != nil {
				t.Fatalf("%s/%s: %v", shape, v, err)
			}
			// The session runs, and the turn is a workflow of its own.
			d, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				t.Fatalf("%s/%s: session: %v", shape, v, err)
			}
			if d.WorkflowExecutionInfo.GetType().GetName() != rawsdk.SessionWorkflowName {
				t.Fatalf("%s/%s: session type %s", shape, v, d.WorkflowExecutionInfo.GetType().GetName())
			}
			turn, err := c.DescribeWorkflowExecution(ctx, id+"/turn_0", "")
			if err != nil {
				t.Fatalf("%s/%s: turn: %v", shape, v, err)
			}
			// Only the child-turn shape makes the turn the session's child.
			parent := turn.WorkflowExecutionInfo.GetParentExecution().GetWorkflowId()
			if want := map[bool]string{true: id}[shape == rawsdk.ShapeChildTurn]; parent != want {
				t.Fatalf("%s/%s: turn's parent %q, want %q", shape, v, parent, want)
			}
		}
	}
}

// The tool as a child workflow: the turn's shape of an eve workflow tool.
func TestChildTurn(t *testing.T) {
	srv := devtest.Shared(t)
	c := devtest.Client(t, srv)
	tq := devtest.TaskQueue(t)
	w := worker.New(c, tq, worker.Options{})
	rawsdk.RegisterWorker(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rawsdk.RunChildTurn(ctx, c, tq, rawsdk.Regular); err != nil {
		t.Fatal(err)
	}
}
