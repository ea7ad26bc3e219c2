package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/bench/internal/benchkit"
	"github.com/eve-temporal/eve/internal/sessions"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

// Turns on a conversation of a given size: the same turn as
// eve-turn/same-session (model step → weather tool → model step, model steps
// local), on one session whose conversation was first seeded to 10 KB, 1 MB
// or 10 MB. Conversations are stored by reference (package conversation), so
// the goal is flat cost: besides latency, each row measures the Temporal
// history bytes and the payload-store bytes written per turn, printed in a
// second table after the main one (reportConversation).
func init() {
	for _, v := range []struct {
		name string
		size int64
	}{
		{"eve-turn/conv-10KB", 10 << 10},
		{"eve-turn/conv-1MB", 1 << 20},
		{"eve-turn/conv-10MB", 10 << 20},
	} {
		base := "eve-turn/conv-10KB"
		if v.name == base {
			base = ""
		}
		scenarios = append(scenarios, scenario{
			name: v.name, baseline: base, latency: true,
			setup: convSetup(v.name, v.size),
		})
	}
	reports = append(reports, reportConversation)
}

// convSeedChunk is the size of the seeding messages (the per-message limit
// is 256 KB).
const convSeedChunk = 200 << 10

const convRules = benchRules + `
default: "Noted."
`

// convStat accumulates one row's per-turn costs.
type convStat struct {
	seedBytes    int64 // conversation bytes after seeding (the session's Ref)
	seedMessages int
	seedTook     time.Duration
	turns        int
	turnHistory  int64 // HistorySizeBytes of the turn workflows
	sessHistory  int64 // growth of the session workflow's history (all runs)
	sessRuns     int   // continue-as-new seen during the measured turns
	storeBytes   int64 // payload-store bytes written
	storePuts    int64
	err          string
}

var (
	convMu    sync.Mutex
	convStats = map[string]*convStat{} // "scenario@config" → stats
)

func convSetup(name string, size int64) func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
	return func(ctx context.Context, env *benchEnv) (runFunc, func(), error) {
		m, err := scripted.Parse([]byte(convRules))
		if err != nil {
			return nil, nil, err
		}
		reg := tools.NewRegistry()
		if err := reg.Register(weatherTool(false, false)); err != nil {
			return nil, nil, err
		}
		tq := env.Queue(name)
		w := worker.New(env.Client, tq, env.WorkerOptions)
		if err := agent.Register(w, &agent.Agent{
			Name: "bench", Model: m, Tools: reg, LocalModel: true,
			// Nothing compacts: the conversation keeps its size.
			ContextWindow: 100_000_000, CompactAt: -1,
			// Nor does the session budget park it (40M input tokens by
			// default, which the 10 MB conversation spends in a few turns):
			// the rows measure turns, not a session out of budget.
			MaxInputTokensPerSession: -1,
		}, agent.Host{Store: env.Store, Client: env.Client}); err != nil {
			return nil, nil, err
		}
		if err := w.Start(); err != nil {
			return nil, nil, err
		}
		svc := &sessions.Service{Client: env.Client, TaskQueue: tq}
		st := &convStat{}
		convMu.Lock()
		convStats[name+"@"+env.Config] = st
		convMu.Unlock()

		t0 := time.Now()
		id, err := convSeed(ctx, svc, size, st)
		if err != nil {
			w.Stop()
			st.err = err.Error()
			return nil, nil, err
		}
		st.seedTook = time.Since(t0)
		fmt.Fprintf(os.Stderr, "bench: %-30s %-20s seeded %d bytes in %d messages in %s\n",
			name, env.Config, st.seedBytes, st.seedMessages, st.seedTook.Round(time.Millisecond))

		return func(ctx context.Context, i int) (time.Duration, error) {
			before, err := describeRun(ctx, env.Client, id, "")
			if err != nil {
				return 0, err
			}
			store0 := env.Store.Stats()
			start := time.Now()
			res, err := svc.Send(ctx, id, signals.SendRequest{Message: fmt.Sprintf("weather, please (%d)", i), Wait: true})
			if err != nil {
				return 0, err
			}
			elapsed := time.Since(start)
			if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
				return 0, fmt.Errorf("turn outcome %+v", res.Outcome)
			}
			// Not timed: what the turn added to the histories and the store.
			turn, err := describeRun(ctx, env.Client, id+"/"+res.TurnID, "")
			if err != nil {
				return 0, err
			}
			after, err := describeRun(ctx, env.Client, id, "")
			if err != nil {
				return 0, err
			}
			grew := after.size - before.size
			runs := 0
			if after.runID != before.runID {
				// Continued as new: the old run's growth, then the new run's.
				old, err := describeRun(ctx, env.Client, id, before.runID)
				if err != nil {
					return 0, err
				}
				grew, runs = old.size-before.size+after.size, 1
			}
			store1 := env.Store.Stats()
			convMu.Lock()
			st.turns++
			st.turnHistory += turn.size
			st.sessHistory += grew
			st.sessRuns += runs
			st.storeBytes += store1.BytesWritten - store0.BytesWritten
			st.storePuts += store1.Puts - store0.Puts
			convMu.Unlock()
			return elapsed, nil
		}, w.Stop, nil
	}
}

// convSeed creates a session and sends it distinct messages of at most
// convSeedChunk bytes (each a turn, with Wait) until its stored conversation
// holds at least size bytes.
func convSeed(ctx context.Context, svc *sessions.Service, size int64, st *convStat) (string, error) {
	id, err := svc.Create(ctx, "", nil)
	if err != nil {
		return "", err
	}
	const filler = "The quick brown fox jumps over the lazy dog. "
	for n := 0; ; n++ {
		sum, err := svc.Summary(ctx, id)
		if err != nil {
			return "", err
		}
		var have int64
		if sum.Conversation != nil {
			have, st.seedMessages = sum.Conversation.Bytes, sum.Conversation.Messages
		}
		st.seedBytes = have
		if have >= size {
			return id, nil
		}
		chunk := min(convSeedChunk, max(size-have, 1<<10))
		head := fmt.Sprintf("seed message %d: ", n)
		text := head + strings.Repeat(filler, int(chunk)/len(filler)+1)[:int(chunk)-len(head)]
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		res, err := svc.Send(cctx, id, signals.SendRequest{Message: text, Wait: true})
		cancel()
		if err != nil {
			return "", fmt.Errorf("seed message %d: %w", n, err)
		}
		if res.Outcome == nil || res.Outcome.Status != signals.TurnStatusCompleted {
			return "", fmt.Errorf("seed message %d: turn outcome %+v", n, res.Outcome)
		}
	}
}

type runSize struct {
	runID string
	size  int64
}

// describeRun returns a workflow run's id and history size (runID "": the
// current run).
func describeRun(ctx context.Context, c client.Client, workflowID, runID string) (runSize, error) {
	d, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return runSize{}, fmt.Errorf("describe %s: %w", workflowID, err)
	}
	info := d.GetWorkflowExecutionInfo()
	return runSize{runID: info.GetExecution().GetRunId(), size: info.GetHistorySizeBytes()}, nil
}

// reportConversation prints the conversation-size table: per row, turn p50
// and the bytes a turn adds, each with its ratio to the 10 KB row of the
// same config.
func reportConversation(w io.Writer, t *benchkit.Table) {
	type line struct {
		row benchkit.Row
		st  convStat
	}
	var lines []line
	convMu.Lock()
	for _, r := range t.Rows {
		if st, ok := convStats[r.Scenario+"@"+r.Config]; ok {
			lines = append(lines, line{r, *st})
		}
	}
	convMu.Unlock()
	if len(lines) == 0 {
		return
	}
	base := func(config string) (line, bool) {
		for _, l := range lines {
			if l.row.Config == config && l.row.Scenario == "eve-turn/conv-10KB" && l.st.turns > 0 {
				return l, true
			}
		}
		return line{}, false
	}
	ratio := func(v, b float64, ok bool) string {
		if !ok || b <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%.2fx)", v/b)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "conversation size\tconfig\tseeded\tturns\tturn p50\thistory bytes/turn (turn wf + session)\tstore bytes/turn (puts)\t")
	for _, l := range lines {
		size := strings.TrimPrefix(l.row.Scenario, "eve-turn/conv-")
		if l.st.turns == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t0\t-\t-\t-\t\n", size, l.row.Config, l.st.err)
			continue
		}
		b, ok := base(l.row.Config)
		n := float64(l.st.turns)
		hist := float64(l.st.turnHistory+l.st.sessHistory) / n
		store := float64(l.st.storeBytes) / n
		p50 := "-"
		if l.row.Latency.N > 0 {
			p50 = benchkit.FormatDuration(l.row.Latency.P50) +
				ratio(float64(l.row.Latency.P50), float64(b.row.Latency.P50), ok && b.row.Latency.N > 0)
		}
		cont := ""
		if l.st.sessRuns > 0 {
			cont = fmt.Sprintf(", %d continue-as-new", l.st.sessRuns)
		}
		var bHist, bStore float64
		if ok {
			bn := float64(b.st.turns)
			bHist, bStore = float64(b.st.turnHistory+b.st.sessHistory)/bn, float64(b.st.storeBytes)/bn
		}
		fmt.Fprintf(tw, "%s\t%s\t%s in %d msgs\t%d\t%s\t%s%s = %s + %s%s\t%s%s (%.1f)\t\n",
			size, l.row.Config, formatBytes(float64(l.st.seedBytes)), l.st.seedMessages, l.st.turns, p50,
			formatBytes(hist), ratio(hist, bHist, ok),
			formatBytes(float64(l.st.turnHistory)/n), formatBytes(float64(l.st.sessHistory)/n), cont,
			formatBytes(store), ratio(store, bStore, ok), float64(l.st.storePuts)/n)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "history bytes/turn: the turn workflow's HistorySizeBytes plus the session workflow's growth;\n"+
		"  store bytes/turn: payload-store bytes written (conversation objects, offloaded payloads);\n"+
		"  both averaged over every call after seeding (warm-up and settle calls included). Ratios: vs 10KB.")
}

func formatBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}
