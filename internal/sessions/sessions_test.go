package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// fakeTemporal answers the calls sessions.Service makes, the way the
// session and turn workflows' handlers do (pages bounded by
// signals.PageEvents). Other calls panic (the embedded nil interface).
type fakeTemporal struct {
	client.Client

	mu sync.Mutex
	id string
	// The session's runs: all events, and where each run's range ends.
	events []protocol.Event
	runEnd []int // run i holds [runEnd[i-1], runEnd[i]); the last entry starts the current run
	turn   []protocol.Event
	active bool
	status enumspb.WorkflowExecutionStatus
	reason string
	log    []string
}

func (f *fakeTemporal) record(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

func (f *fakeTemporal) runID(i int) string { return fmt.Sprintf("run%d", i) }

// sessionPage is the session workflow's events handler, in run r.
func (f *fakeTemporal) sessionPage(r int, from int) signals.EventsPage {
	lo := 0
	if r > 0 {
		lo = f.runEnd[r-1]
	}
	hi := len(f.events)
	if r < len(f.runEnd) {
		hi = f.runEnd[r]
	}
	page := signals.EventsPage{Total: hi}
	if r == len(f.runEnd) && f.active {
		page.ActiveTurn = &signals.ActiveTurn{WorkflowID: f.id + "/turn_9", TurnID: "turn_9", Base: hi}
	}
	from = max(from, 0)
	if from < lo {
		for i := 0; i < r; i++ {
			start := 0
			if i > 0 {
				start = f.runEnd[i-1]
			}
			if f.runEnd[i] > from {
				page.Runs = append(page.Runs, signals.RunRef{RunID: f.runID(i), From: start, To: f.runEnd[i]})
			}
		}
		from = lo
	}
	if from < hi {
		page.Events = signals.PageEvents(f.events[from:hi])
	}
	page.From = from
	return page
}

func (f *fakeTemporal) QueryWorkflowWithOptions(_ context.Context, req *client.QueryWorkflowWithOptionsRequest) (*client.QueryWorkflowWithOptionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.WorkflowID != f.id {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + req.WorkflowID)
	}
	if f.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && req.QueryRejectCondition == enumspb.QUERY_REJECT_CONDITION_NOT_OPEN {
		return &client.QueryWorkflowWithOptionsResponse{QueryRejected: &querypb.QueryRejected{Status: f.status}}, nil
	}
	switch req.QueryType {
	case signals.QueryEvents:
		q := req.Args[0].(signals.EventsQuery)
		f.record("session %d", q.From)
		return &client.QueryWorkflowWithOptionsResponse{QueryResult: value{f.sessionPage(len(f.runEnd), q.From)}}, nil
	case signals.QueryState:
		sum := signals.SessionSummary{SessionID: f.id}
		if f.active {
			sum.ActiveTurn = f.sessionPage(len(f.runEnd), 0).ActiveTurn
		}
		return &client.QueryWorkflowWithOptionsResponse{QueryResult: value{sum}}, nil
	}
	return nil, fmt.Errorf("unexpected query %s", req.QueryType)
}

func (f *fakeTemporal) QueryWorkflow(_ context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case workflowID == f.id && queryType == signals.QueryEvents && runID != "":
		q := args[0].(signals.EventsQuery)
		f.record("%s %d", runID, q.From)
		for i := range f.runEnd {
			if f.runID(i) == runID {
				return value{f.sessionPage(i, q.From)}, nil
			}
		}
		return nil, serviceerror.NewNotFound("no run " + runID)
	case workflowID == f.id+"/turn_9" && queryType == signals.QueryTurnEvents && f.active:
		from := args[0].(int)
		f.record("turn %d", from)
		if from < 0 || from > len(f.turn) {
			return nil, serviceerror.NewQueryFailed(fmt.Sprintf("event index %d out of range [0,%d]", from, len(f.turn)))
		}
		return value{signals.PageEvents(f.turn[from:])}, nil
	}
	return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if workflowID != f.id {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: f.id, RunId: "run-last"},
		Status:    f.status,
	}}, nil
}

func (f *fakeTemporal) GetWorkflowHistory(_ context.Context, _, _ string, _ bool, filter enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs []*historypb.HistoryEvent
	if filter == enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT && f.status == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		evs = append(evs, &historypb.HistoryEvent{
			EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
			Attributes: &historypb.HistoryEvent_WorkflowExecutionTerminatedEventAttributes{
				WorkflowExecutionTerminatedEventAttributes: &historypb.WorkflowExecutionTerminatedEventAttributes{Reason: f.reason},
			},
		})
	}
	return &iterator{evs: evs}
}

func (f *fakeTemporal) UpdateWorkflow(_ context.Context, opts client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if opts.WorkflowID != f.id {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + opts.WorkflowID)
	}
	if f.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	return nil, errors.New("not faked")
}

type iterator struct{ evs []*historypb.HistoryEvent }

func (it *iterator) HasNext() bool { return len(it.evs) > 0 }
func (it *iterator) Next() (*historypb.HistoryEvent, error) {
	e := it.evs[0]
	it.evs = it.evs[1:]
	return e, nil
}

// value is an EncodedValue holding v (JSON round trip, as the SDK's).
type value struct{ v any }

func (v value) HasValue() bool { return v.v != nil }
func (v value) Get(ptr any) error {
	b, err := json.Marshal(v.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, ptr)
}

func event(i, size int) protocol.Event {
	data, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", size)})
	return protocol.Event{Type: "message.received", Data: data, Meta: protocol.Meta{ID: fmt.Sprintf("evt_%03d", i)}}
}

// bigSession has 3 runs (continue-as-new) and a running turn, with events
// of 200-300 KB, so every query answers a truncated page.
func bigSession() *fakeTemporal {
	f := &fakeTemporal{id: "ses_1", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, active: true}
	n := 0
	for range 15 {
		f.events = append(f.events, event(n, 200_000+n*1000))
		n++
	}
	f.runEnd = []int{5, 9} // runs [0,5), [5,9); the current run holds [9,15)
	for range 10 {
		f.turn = append(f.turn, event(n, 300_000))
		n++
	}
	return f
}

func (f *fakeTemporal) all() []protocol.Event {
	return append(append([]protocol.Event(nil), f.events...), f.turn...)
}

func checkAll(t *testing.T, got, want []protocol.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Meta.ID != want[i].Meta.ID {
			t.Fatalf("event %d is %s, want %s", i, got[i].Meta.ID, want[i].Meta.ID)
		}
	}
}

// Reading a log whose queries all answer truncated pages: each page is
// partial, says the honest total, and paging on from Next yields every
// event once, in order.
func TestReadPagesTruncatedLogs(t *testing.T) {
	f := bigSession()
	s := &Service{Client: f}
	ctx := context.Background()
	total := len(f.all())
	var got []protocol.Event
	p, err := s.Read(ctx, "ses_1", 0)
	pages := 0
	for {
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if p.Total != total || !p.Active || p.Turn == nil {
			t.Fatalf("page %d: total %d active %v turn %v, want total %d and the turn", pages, p.Total, p.Active, p.Turn, total)
		}
		if p.From != len(got) || len(p.Events) == 0 {
			t.Fatalf("page %d: from %d with %d events after %d read", pages, p.From, len(p.Events), len(got))
		}
		if size := eventsSize(p.Events); size > 2*signals.MaxEventsPageBytes+300_000 {
			t.Fatalf("page %d holds %d bytes", pages, size)
		}
		got = append(got, p.Events...)
		if !p.More() {
			break
		}
		p, err = s.ReadNext(ctx, "ses_1", p.Next(), p)
	}
	checkAll(t, got, f.all())
	if pages < 6 {
		t.Fatalf("%d pages: the reads were not bounded", pages)
	}
	// The same through Read alone, and through Events.
	got = nil
	for next := 0; next < total; {
		p, err := s.Read(ctx, "ses_1", next)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Events...)
		next = p.Next()
	}
	checkAll(t, got, f.all())
	evs, err := s.Events(ctx, "ses_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, evs, f.all())
}

// A negative index reads the tail from where it starts, never from 0.
func TestReadNegativeReadsOnlyTheTail(t *testing.T) {
	f := bigSession()
	s := &Service{Client: f}
	ctx := context.Background()
	total := len(f.all())
	for _, back := range []int{1, 3, 12} {
		f.log = nil
		p, err := s.Read(ctx, "ses_1", -back)
		if err != nil {
			t.Fatal(err)
		}
		if p.From != total-back || p.Total != total || len(p.Events) == 0 {
			t.Fatalf("-%d: from %d, %d events, total %d", back, p.From, len(p.Events), p.Total)
		}
		for _, q := range f.log {
			var from int
			if _, err := fmt.Sscanf(q, "session %d", &from); err == nil && from < total-back {
				t.Fatalf("-%d queried %q", back, q)
			}
			if strings.HasPrefix(q, "run") {
				t.Fatalf("-%d queried an earlier run: %q", back, q)
			}
		}
		evs, err := s.Events(ctx, "ses_1", -back)
		if err != nil {
			t.Fatal(err)
		}
		checkAll(t, evs, f.all()[total-back:])
	}
	// Past the tail: nothing, and the honest total.
	p, err := s.Read(ctx, "ses_1", total+5)
	if err != nil || len(p.Events) != 0 || p.Total != total || p.More() {
		t.Fatalf("past the tail: %d events, total %d, err %v", len(p.Events), p.Total, err)
	}
	// Far back: clamped at 0.
	if p, err := s.Read(ctx, "ses_1", -1000); err != nil || p.From != 0 {
		t.Fatalf("-1000: from %d err %v", p.From, err)
	}
}

// Input requests fold across pages: a request asked on one page and
// settled pages later is not open.
func TestInputsAcrossPages(t *testing.T) {
	f := bigSession()
	f.active = false
	ev := func(typ string, data any) protocol.Event {
		b, _ := json.Marshal(data)
		return protocol.Event{Type: typ, Data: b, Meta: protocol.Meta{ID: typ}}
	}
	f.events[1] = ev(protocol.InputRequested, protocol.InputRequestedData{Requests: []protocol.InputRequest{{RequestID: "a"}, {RequestID: "b"}}, StepRef: protocol.StepRef{TurnID: "turn_0"}})
	f.events[13] = ev(protocol.InputResolved, protocol.InputResolvedData{Resolutions: []protocol.InputResolution{{RequestID: "a", Outcome: protocol.OutcomeApproved}}})
	in, err := (&Service{Client: f}).Inputs(context.Background(), "ses_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if open := in.Open(); len(open) != 1 || open[0].RequestID != "b" || open[0].Index != 1 || !in.Settled("a") {
		t.Fatalf("open %+v, a settled: %v", open, in.Settled("a"))
	}
	var whole protocol.Inputs
	whole.AddEvents(0, f.events)
	if open := whole.Open(); len(open) != 1 || open[0].RequestID != "b" {
		t.Fatalf("the whole log folds to open %+v", open)
	}
}

// A closed session answers EndedError with the reason to every call; an
// unknown id stays ErrNotFound.
func TestEndedAndUnknownSessions(t *testing.T) {
	f := bigSession()
	f.status = enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED
	f.reason = "Workflow history size exceeds limit."
	s := &Service{Client: f}
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		var e *EndedError
		if !errors.As(err, &e) || !errors.Is(err, ErrEnded) || e.Status != StatusTerminated || e.Reason != f.reason || e.SessionID != "ses_1" {
			t.Fatalf("%s: err = %v, want EndedError(terminated, %q)", what, err, f.reason)
		}
		if errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: an ended session is not ErrNotFound", what)
		}
	}
	_, err := s.Read(ctx, "ses_1", 0)
	check("read", err)
	_, err = s.Send(ctx, "ses_1", signals.SendRequest{Message: "hi"})
	check("send", err)
	_, err = s.Control(ctx, "ses_1", signals.ControlRequest{Op: signals.ControlCancel})
	check("control", err)
	_, err = s.Respond(ctx, "ses_1", signals.RespondRequest{})
	check("respond", err)
	_, err = s.Summary(ctx, "ses_1")
	check("summary", err)
	_, err = s.Events(ctx, "ses_1", 0)
	check("events", err)
	if !strings.Contains(err.Error(), "terminated: Workflow history size exceeds limit.") {
		t.Fatalf("message %q", err)
	}
	// What it recorded reads page by page, its cut-short turn included:
	// ReadNext reads on from a page of its record (Ended) as ReadEnded.
	if p, err := s.ReadEnded(ctx, "ses_1", 0); err != nil || !p.Ended || !p.More() {
		t.Fatalf("ReadEnded: ended %v, more %v, %v; want a first page of the record", p.Ended, p.More(), err)
	}
	history, err := s.History(ctx, "ses_1")
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, history, f.all())

	for what, call := range map[string]func() error{
		"read": func() error { _, err := s.Read(ctx, "ses_unknown", 0); return err },
		"send": func() error { _, err := s.Send(ctx, "ses_unknown", signals.SendRequest{Message: "hi"}); return err },
		"control": func() error {
			_, err := s.Control(ctx, "ses_unknown", signals.ControlRequest{Op: "cancel"})
			return err
		},
		"respond": func() error { _, err := s.Respond(ctx, "ses_unknown", signals.RespondRequest{}); return err },
	} {
		if err := call(); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrEnded) {
			t.Fatalf("%s of an unknown id: %v, want ErrNotFound", what, err)
		}
	}
}

func TestOutOfRange(t *testing.T) {
	for _, c := range []struct {
		err  error
		n    int
		isOK bool
	}{
		{fmt.Errorf("read: %w", serviceerror.NewQueryFailed("event index 1073741824 out of range [0,17]")), 17, true},
		{serviceerror.NewQueryFailed("something else"), 0, false},
		{errors.New("event index 3 out of range [0,2]"), 0, false},
		{nil, 0, false},
	} {
		if n, ok := outOfRange(c.err); n != c.n || ok != c.isOK {
			t.Errorf("outOfRange(%v) = %d, %v", c.err, n, ok)
		}
	}
}
