package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/eve-temporal/eve/bench/internal/benchkit"
)

// Hops: after a scenario's measurements, runScenario makes one more call
// with a recorder in its context (withHops); the scenario names the
// workflows it started (recordHop), and the histories of those workflows
// and of their children are counted (benchkit.CountHops: history events,
// workflow tasks and Temporal Cloud billable actions). reportHops prints
// them as a second table, each eve row beside its raw-SDK baseline.
//
// Queries leave no history: not counted (the raw park variant polls one to
// see that it parked; eve's respond does not).

// hopsDump (EVE_BENCH_HOPS_DUMP=1) prints the counted histories' events.
var hopsDump = os.Getenv("EVE_BENCH_HOPS_DUMP") != ""

type hopRecorder struct {
	mu  sync.Mutex
	ids []string
}

type hopKey struct{}

func withHops(ctx context.Context) (context.Context, *hopRecorder) {
	r := &hopRecorder{}
	return context.WithValue(ctx, hopKey{}, r), r
}

// recordHop notes a workflow a measured call started, when the call is the
// counted one.
func recordHop(ctx context.Context, workflowID string) {
	if r, ok := ctx.Value(hopKey{}).(*hopRecorder); ok {
		r.mu.Lock()
		r.ids = append(r.ids, workflowID)
		r.mu.Unlock()
	}
}

func hopsRequested(ctx context.Context) bool {
	_, ok := ctx.Value(hopKey{}).(*hopRecorder)
	return ok
}

// hopCount is what one call cost in Temporal.
type hopCount = benchkit.Hops

func countHops(ctx context.Context, c client.Client, ids []string) (hopCount, error) {
	var each func(string, *historypb.HistoryEvent)
	if hopsDump {
		each = func(id string, e *historypb.HistoryEvent) {
			fmt.Fprintf(os.Stderr, "hops %s %d %s%s (%d bytes)\n", id, e.GetEventId(), e.GetEventType(), hopDetail(e), proto.Size(e))
		}
	}
	return benchkit.CountHops(ctx, c, ids, each)
}

// hopDetail names what an upsert or marker event carries (for hopsDump).
func hopDetail(e *historypb.HistoryEvent) string {
	var keys []string
	switch {
	case e.GetUpsertWorkflowSearchAttributesEventAttributes() != nil:
		for k := range e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
			keys = append(keys, k)
		}
	case e.GetWorkflowPropertiesModifiedEventAttributes() != nil:
		for k := range e.GetWorkflowPropertiesModifiedEventAttributes().GetUpsertedMemo().GetFields() {
			keys = append(keys, k)
		}
	case e.GetMarkerRecordedEventAttributes() != nil:
		a := e.GetMarkerRecordedEventAttributes()
		keys = append(keys, a.GetMarkerName())
		if id, ok := a.GetDetails()["change-id"]; ok && len(id.GetPayloads()) > 0 {
			keys = append(keys, string(id.GetPayloads()[0].GetData()))
		}
	case e.GetWorkflowExecutionSignaledEventAttributes() != nil:
		keys = append(keys, e.GetWorkflowExecutionSignaledEventAttributes().GetSignalName())
	default:
		return ""
	}
	sort.Strings(keys)
	return " " + strings.Join(keys, ",")
}

var (
	hopsMu   sync.Mutex
	hopsRows = map[string]hopCount{} // "scenario@config" → counts
	hopsErrs = map[string]string{}
)

// measureHops makes one counted call of a scenario.
func measureHops(ctx context.Context, a *active, s scenario) {
	if a.failed || !s.hops {
		return
	}
	key := s.name + "@" + a.t.cfg.name
	hctx, rec := withHops(ctx)
	_, err := a.run(hctx, 1<<30)
	var h hopCount
	if err == nil {
		h, err = countHops(ctx, a.t.env.Client, rec.ids)
	}
	hopsMu.Lock()
	defer hopsMu.Unlock()
	if err != nil {
		hopsErrs[key] = err.Error()
		return
	}
	hopsRows[key] = h
}

func init() { reports = append(reports, reportHops) }

// reportHops prints history events and billable actions per call.
func reportHops(w io.Writer, t *benchkit.Table) {
	hopsMu.Lock()
	defer hopsMu.Unlock()
	if len(hopsRows) == 0 && len(hopsErrs) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "per call\tconfig\tworkflows\thistory events\tworkflow tasks\tbillable actions\tvs baseline\tactions by kind\t\n")
	for _, r := range t.Rows {
		key := r.Scenario + "@" + r.Config
		if msg, ok := hopsErrs[key]; ok {
			fmt.Fprintf(tw, "%s\t%s\t\t\t\t\t\terror: %s\t\n", r.Scenario, r.Config, msg)
			continue
		}
		h, ok := hopsRows[key]
		if !ok {
			continue
		}
		ratio := ""
		if b, ok := hopsRows[hopBaseline(r.Baseline, r.Config)]; ok && b.Actions > 0 && b.Events > 0 {
			ratio = fmt.Sprintf("%.2fx events, %.2fx actions", float64(h.Events)/float64(b.Events), float64(h.Actions)/float64(b.Actions))
		}
		var kinds []string
		for k, n := range h.ByType {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(kinds)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Scenario, r.Config, h.Workflows, h.Events, h.Tasks, h.Actions, ratio, strings.Join(kinds, ", "))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "per call: one call after the measurements, counted from the histories of the workflows it started (and their children);\n"+
		"  park rows count the whole call (start, park, respond, done). billable actions: Temporal Cloud's definition\n"+
		"  (docs.temporal.io/cloud/actions) as the history shows it. Queries leave no history and are not counted here,\n"+
		"  but on Temporal Cloud every query a worker answers is an action too (stream reads are queries: see streambench).")
}

func hopBaseline(baseline, config string) string {
	if baseline == "" {
		return ""
	}
	if strings.Contains(baseline, "@") {
		return baseline
	}
	return baseline + "@" + config
}
