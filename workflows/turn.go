package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/conversation"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// turnInput starts one turn.
type turnInput struct {
	SessionID string    `json:"sessionId"`
	TurnID    string    `json:"turnId"`
	Sequence  int       `json:"sequence"`
	Auth      auth.Auth `json:"auth"`
	Message   string    `json:"message"`
	// Conversation is the stored conversation before this turn.
	Conversation *conversation.Ref `json:"conversation,omitempty"`
	DeliveryIDs  []string          `json:"deliveryIds,omitempty"`
	// EventBase is the global index of the turn's first event.
	EventBase int    `json:"eventBase"`
	Config    Config `json:"config"`
	// ApprovedTools are the tools approved once in this session.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// Budget is what the session spent in its current limit window before
	// this turn (Config.Limits).
	Budget protocol.TokenUsage `json:"budget,omitempty"`
	// SessionTools were resolved when the session started.
	SessionTools []work.DynamicTool `json:"sessionTools,omitempty"`
	// Stubs are the session's tool stubs and their positions (nil: none).
	Stubs *stubState `json:"stubs,omitempty"`
	// PrevTurn is the workflow id of the session's previous turn, and
	// CalledBy the parent turn's call when a subagent's session runs
	// this turn: the turn's trace links to both (trace.go).
	PrevTurn string                `json:"prevTurn,omitempty"`
	CalledBy *signals.AgentReplyTo `json:"calledBy,omitempty"`
	// Tasks are the session's idle resumable tasks, TasksNote the [Tasks]
	// note the model read last (tasks.go).
	Tasks     []heldTask `json:"tasks,omitempty"`
	TasksNote string     `json:"tasksNote,omitempty"`
	// Origin is the session's place under its root session when it is a
	// subagent's child (changeSubagentOrigin): the turn's inbox memo and
	// decision records name it.
	Origin *protocol.SubagentOrigin `json:"origin,omitempty"`
	// Versions: the turn takes the changes of inputGenerations up to it as
	// on, without markers (changeTurnVersions: 1, changeInputVersions: 2).
	// 0 in the inputs of turns started before them.
	Versions int `json:"versions,omitempty"`
	// Decides: the session offers the turn every message that arrives
	// while it runs and keeps no mirror of its open requests
	// (changeTurnDecides; steer.go). Report: someone waits for the turn's
	// outcome, so it tells the session when it parks. A turn without
	// Decides tells it at every park, as turns always did.
	Decides bool `json:"decides,omitempty"`
	Report  bool `json:"report,omitempty"`
	// OutputSchema is the structured result the turn's message asked for
	// (signals.SendRequest.OutputSchema; output.go).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// turnOutput is what the session keeps of a finished turn.
type turnOutput struct {
	Events []protocol.Event `json:"events"`
	// Conversation is the stored conversation after the turn.
	Conversation *conversation.Ref   `json:"conversation,omitempty"`
	Outcome      signals.TurnOutcome `json:"outcome"`
	Usage        protocol.TokenUsage `json:"usage"`
	// ApprovedTools is the session's once-approved set after the turn.
	ApprovedTools []string `json:"approvedTools,omitempty"`
	// GrantedAt is the turn's usage when a person last granted a fresh
	// limit window (Continue); nil when nobody did.
	GrantedAt *protocol.TokenUsage `json:"grantedAt,omitempty"`
	// Taken are the delivery ids of the messages the session offered that
	// the turn used (answers, steering); the session runs the others as
	// turns of their own.
	Taken []string `json:"taken,omitempty"`
	// StubPositions are the stub rules' positions after the turn.
	StubPositions map[string]int `json:"stubPositions,omitempty"`
	// Tasks and TasksNote are the session's resumable tasks and the last
	// [Tasks] note after the turn (nil, "": the turn ran no task code).
	Tasks     []heldTask `json:"tasks,omitempty"`
	TasksNote string     `json:"tasksNote,omitempty"`
}

// Error codes of turn.failed.
const (
	codeMaxSteps   = "MAX_STEPS_EXCEEDED"
	codeModelError = "MODEL_ERROR"
	// codeResolution is the turn.failed code of a tool resolver failure.
	codeResolution = "TOOL_RESOLUTION_FAILED"
)

// turn is one running turn workflow.
type turn struct {
	in     turnInput
	cfg    Config
	parent *workflow.Execution // the session, told of open requests
	log    eventLog            // the turn's events, handed to the session at the end
	conv   transcript          // the conversation
	board  *inputBoard         // what the turn asked people and what they decided
	usage  protocol.TokenUsage

	// The running step: stepDone is the last step whose model call
	// returned (-1 before any), so late text deltas of a finished step are
	// dropped; streamed is its text sent as message.appended so far.
	stepIdx  int
	stepDone int
	streamed string
	// dynamic are the resolved tools in force (session, turn, step);
	// turnDyn the turn's.
	dynamic []work.DynamicTool
	turnDyn []work.DynamicTool

	parks int // how often the turn parked for input
	// inbox: the turn publishes its open requests in its memo (the
	// inbox's, changeInbox). quiet: it does not tell its session when its
	// last open request closes (changeQuietResume, decided at its first
	// park; input.go).
	inbox, quietDecided, quiet bool
	// fromTurns: the turn's status is its session's (changeStatusFromTurns),
	// so it says waiting-input while a request its subagents proxied is
	// open. statusMemo: without the inbox's memo, the turn says in its
	// status memo that an answered park runs on.
	fromTurns, statusMemo bool
	// report: the turn tells its session of its open requests
	// (eve.turn.inputs): always without in.Decides, else while someone
	// waits for its outcome (in.Report, or a message it took with
	// signals.TurnMessage.Report).
	report bool
	// limits: the turn holds on its session's limits (changeLimits);
	// grantedAt is its usage at the last Continue.
	limits    bool
	grantedAt *protocol.TokenUsage
	// tasks: delegated calls are reported as tasks (changeTasks).
	tasks bool
	// actions are the delegated calls' actions, by id; delegatedOpen
	// counts those waiting for their jobs.
	actions       map[string]*actionState
	delegatedOpen int
	// running are the calls whose tools run, by call id (they may ask).
	running map[string]runningCall

	// Tasks (changeTaskCalls, decided at the first task or task-tool
	// call: tasksDecided): taskList in the order they started,
	// taskResults settled and not read by the model yet, lastNote the
	// [Tasks] note the model read last (tasks.go).
	taskCalls    bool
	tasksDecided bool
	taskList     []*taskState
	taskResults  []taskResult
	lastNote     string
	taskUse      int // counts task calls (taskState.used)
	// agentReplies are the subagents' replies to this turn's calls, by
	// call id (subagent.go).
	agentReplies map[string]signals.AgentReply
	// agentInputs: a coroutine receives the relayed inputs of the turn's
	// children (subagent.go, agentcall.go).
	agentInputs bool
	// Proxied input (proxy.go, changeProxyInput): relays are the requests
	// a child turn asked through this turn, by request id; relayedSeen the
	// relayed approval events recorded; proxyOn whether this subagent's
	// turn relays its own (decided at its first such event).
	relays       map[string]*relayed
	relayedSeen  map[string]bool
	proxyOn      bool
	proxyDecided bool
	relayQueue   []signals.AgentInput
	relaySending bool
	// typedOn: a typed message may answer a request a child proxied
	// (typed.go, changeProxyTyped; decided at the first one).
	typedOn      bool
	typedDecided bool
	// callTasks are the task ids of this turn's subagent calls, by call
	// id (a proxied input.requested carries its call's: changeProxyTaskID).
	callTasks map[string]string
	// reqTag is the tag in a subagent's turn's request ids (requestTag).
	reqTag     string
	tagDecided bool
	// askTag is the tag a subagent's turn hands its running calls for
	// their own questions' ids (askTagFor).
	askTag        string
	askTagDecided bool
	// stopping counts the cancels on their way to children
	// (subagent_cancel.go): the turn does not end before they are sent.
	stopping int

	// steering are messages the model reads before its next step (the
	// first steerReceived of them already have their message.received);
	// taken the offered messages used; closing: the turn takes no more
	// messages. ordered: every message taken is read, in the order taken
	// (changeOrder).
	steering      []signals.TurnMessage
	steerReceived int
	taken         []string
	closing       bool
	ordered       bool

	// vis: the turn's search attributes are written by writeVisibility
	// from visStatus, visTools and the board (changeSearchWrites).
	vis       bool
	visStatus string
	visTools  []string
	visInbox  bool

	// Tracing (trace.go): the turn's workflow id and start, the running
	// step's start and whether its span is still to emit, the code of
	// turn.failed.
	wid       string
	started   time.Time
	stepStart time.Time
	stepOpen  bool
	failCode  string

	// out is the structured result the turn must produce (output.go);
	// data the value it ended with.
	out  *structured
	data json.RawMessage

	// How the turn ended.
	finished bool
	status   string
	reply    string
	errMsg   string
}

// Turn runs the step loop: the model answers; its tool calls pass the
// gate, people are asked in one input.requested and the turn parks; each
// call awaits its person and executes, concurrently; the model reads the
// results in the next step, until it answers without tool calls or
// MaxSteps is reached. Failures of the model or of tools become events,
// never a failed workflow.
func (r *runtime) Turn(ctx workflow.Context, in turnInput) (turnOutput, error) {
	t, err := r.startTurn(ctx, in)
	if err != nil {
		return turnOutput{}, err
	}
	t.setStatus(ctx, statusRunning, nil)
	t.log.emit(ctx, protocol.TurnStarted, t.startedData())
	t.messageReceived(ctx, "", in.Message)
	t.conv.add(model.Message{Role: model.RoleUser, Text: in.Message})
	if err := t.startStructured(ctx); err != nil {
		return t.turnFailed(ctx, codeOutputSchema, err.Error())
	}
	if err := t.resolveTurnTools(ctx); err != nil {
		return t.resolutionFailed(ctx, err)
	}
	for stepIdx := 0; ; stepIdx++ {
		t.stepIdx = stepIdx
		if ctx.Err() != nil {
			return t.cancelled(ctx)
		}
		if stepIdx >= t.cfg.MaxSteps {
			return t.turnFailed(ctx, codeMaxSteps, fmt.Sprintf("the turn stopped after %d model steps without a final answer; the model kept calling tools. Raise the agent's max steps (EVE_MAX_STEPS) if this is expected.", t.cfg.MaxSteps))
		}
		if err := t.resolveStepTools(ctx, stepIdx); err != nil {
			return t.resolutionFailed(ctx, err)
		}
		if t.conv.full(t.cfg) {
			t.compact(ctx, stepIdx)
			if ctx.Err() != nil {
				return t.cancelled(ctx)
			}
			t.lastNote = "" // the note returns after compaction
		}
		t.deliverTasks()

		if t.limits {
			if out, ended := t.holdForLimits(ctx, stepIdx); ended {
				return out, nil
			}
		}

		// The model.
		t.stepStarted(ctx, stepIdx)
		res, err := t.modelStep(ctx, stepIdx)
		if err != nil {
			if ctx.Err() != nil {
				return t.cancelled(ctx)
			}
			return t.stepFailed(ctx, stepIdx, errorMessage(err))
		}
		resp := res.Response
		usage := protocol.StepUsage(resp.Usage)
		t.usage = t.usage.Add(usage)
		if resp.Text != "" {
			t.streamRest(ctx, stepIdx, resp.Text)
			t.log.emit(ctx, protocol.MessageCompleted, protocol.MessageCompletedData{FinishReason: resp.FinishReason, Message: resp.Text, StepRef: t.step(stepIdx)})
		}
		t.conv.answered(res.Conversation, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if t.out != nil {
			if value := t.takeReply(resp); value != nil {
				t.stepCompleted(ctx, stepIdx, resp.FinishReason, usage)
				return t.endStructured(ctx, stepIdx, value)
			}
		}
		if len(resp.ToolCalls) == 0 {
			t.stepCompleted(ctx, stepIdx, resp.FinishReason, usage)
			if len(t.steering) > 0 && (stepIdx+1 < t.cfg.MaxSteps || t.ordered) {
				// A message steered while the model answered: it reads it
				// in another step of this turn (in order mode even past
				// the last, which then fails the turn with MAX_STEPS: a
				// message the turn took is read by it).
				t.readSteering(ctx)
				continue
			}
			if t.mustHold() {
				// The turn rule: no turn ends while a task works.
				if !t.holdForTasks(ctx) {
					return t.cancelled(ctx)
				}
				if len(t.steering) > 0 {
					t.readSteering(ctx)
				}
				continue
			}
			if t.out != nil {
				// An answer in prose where a structured result was asked.
				return t.turnFailed(ctx, codeOutputSchema, msgOutputSchema)
			}
			t.closing = true
			t.log.emit(ctx, protocol.TurnCompleted, t.ref())
			return t.finish(ctx, signals.TurnStatusCompleted, resp.Text, "")
		}

		// Its tool calls: gate → park → await → execute.
		if others := t.otherCalls(resp.ToolCalls); len(others) > 0 {
			t.actionsRequested(ctx, stepIdx, others)
		}
		calls := t.gate(ctx, stepIdx, res.Plans)
		if asked := requestsOf(calls); len(asked) > 0 {
			t.park(ctx, stepIdx, asked)
		}
		t.concurrently(ctx, stepIdx, calls, func(ctx workflow.Context, c *pendingCall) {
			switch {
			case c.control:
				t.taskControl(ctx, c)
			case !t.await(ctx, c):
			case t.isTask(c):
				t.startTask(ctx, c)
			default:
				t.execute(ctx, c)
			}
		})
		t.conv.reviseEdited(ctx, t.in, resp, calls)
		results := toolResults(calls)
		if t.out != nil {
			results = append(results, t.out.results...) // eve__reply's answers
		}
		t.conv.add(model.Message{Role: model.RoleTool, ToolResults: results})
		if ctx.Err() != nil {
			return t.cancelled(ctx)
		}
		t.stepCompleted(ctx, stepIdx, resp.FinishReason, usage)
		t.readSteering(ctx)
	}
}

// startTurn sets up the turn's state and handlers.
func (r *runtime) startTurn(ctx workflow.Context, in turnInput) (*turn, error) {
	t := &turn{in: in, cfg: in.Config.withDefaults(),
		parent:   workflow.GetInfo(ctx).ParentWorkflowExecution,
		log:      eventLog{rt: r, sessionID: in.SessionID, base: in.EventBase, deliveries: in.DeliveryIDs},
		stepDone: -1, actions: map[string]*actionState{}}
	info := workflow.GetInfo(ctx)
	t.wid, t.started = info.WorkflowExecution.ID, info.WorkflowStartTime
	if in.CalledBy != nil && in.CalledBy.WorkflowID != "" {
		t.log.relay = t.relayUp
	}
	// A turn whose session says so (in.Versions: changeTurnVersions,
	// changeInputVersions) takes these changes as on from its input,
	// recorded in its start event, instead of a version marker each (and
	// the SDK's TemporalChangeVersion upsert with it: a Visibility write on
	// the server per marker).
	t.board = newInputBoard(in, t.changeOn(ctx, changeResponses))
	t.tasks = t.changeOn(ctx, changeTasks)
	t.limits = t.cfg.Limits != (SessionLimits{}) && t.changeOn(ctx, changeLimits)
	t.ordered = t.changeOn(ctx, changeOrder)
	inbox := t.cfg.SearchAttributes && !t.cfg.NoInbox && t.changeOn(ctx, changeInbox)
	// A turn's status is its session's (changeStatusFromTurns): it writes
	// it whenever its session started it with the attributes.
	t.fromTurns = fromInput(in.Versions, changeStatusFromTurns)
	t.report = !in.Decides || in.Report
	t.vis = (t.cfg.SearchAttributes || t.fromTurns && visStart(ctx).session != "") && t.changeOn(ctx, changeSearchWrites)
	t.inbox = inbox
	t.statusMemo = t.vis && t.fromTurns && !inbox
	switch {
	case t.vis:
		t.visStatus, t.visInbox = statusRunning, inbox
		writeVisibility(ctx, t.visState, inbox, t.statusMemo, in.Versions)
		if inbox {
			publishInboxMemo(ctx, t.board, t.relayedOpen)
		}
	case inbox:
		publishInbox(ctx, t.board)
	}
	if err := t.registerInputHandlers(ctx); err != nil {
		return nil, err
	}
	if err := registerActionHandlers(ctx, func(id string) *actionState { return t.actions[id] }); err != nil {
		return nil, err
	}
	if err := t.registerTaskQuery(ctx); err != nil {
		return nil, err
	}
	if err := t.registerTaskCancel(ctx); err != nil {
		return nil, err
	}
	if err := workflow.SetQueryHandler(ctx, signals.QueryTurnEvents, func(from int) ([]protocol.Event, error) {
		if from < 0 || from > len(t.log.events) {
			return nil, fmt.Errorf("event index %d out of range [0,%d]", from, len(t.log.events))
		}
		return signals.PageEvents(t.log.events[from:]), nil
	}); err != nil {
		return nil, err
	}
	t.listenCodeAgents(ctx) // agentcall.go
	t.conv = newTranscript(in)
	t.lastNote = in.TasksNote
	t.loadHeldTasks()
	return t, nil
}

// changeOn reports whether change id is on for this turn (changes.go).
func (t *turn) changeOn(ctx workflow.Context, id string) bool {
	return changeOn(ctx, t.in.Versions, id)
}

// session is who the turn's tools and policies run for.
func (t *turn) session() auth.Session { return auth.Session{ID: t.in.SessionID, Auth: t.in.Auth} }

// resolveTurnTools runs the turn's tool resolvers, if any.
func (t *turn) resolveTurnTools(ctx workflow.Context) error {
	if !t.cfg.hasScope("turn") {
		return nil
	}
	ts, err := resolveTools(ctx, work.ResolveInput{Scope: "turn", Session: t.session(), TurnID: t.in.TurnID})
	t.turnDyn = ts
	return err
}

// resolveStepTools runs the step's tool resolvers, if any, and puts the
// session's, the turn's and the step's tools in force.
func (t *turn) resolveStepTools(ctx workflow.Context, stepIdx int) error {
	var stepDyn []work.DynamicTool
	if t.cfg.hasScope("step") {
		ts, err := resolveTools(ctx, work.ResolveInput{Scope: "step", Session: t.session(), TurnID: t.in.TurnID, StepIndex: stepIdx})
		if err != nil {
			return err
		}
		stepDyn = ts
	}
	dyn, err := mergeDynamic(t.in.SessionTools, t.turnDyn, stepDyn)
	if err != nil {
		return err
	}
	t.dynamic = dyn
	return nil
}

// modelStep runs one model step over the conversation with the tools in force.
func (t *turn) modelStep(ctx workflow.Context, stepIdx int) (work.ModelStepOutput, error) {
	step := work.ModelStepInput{SessionID: t.in.SessionID, TurnID: t.in.TurnID, StepIndex: stepIdx, Dynamic: t.dynamic}
	if t.out != nil {
		step.OutputSchema = t.out.raw
	}
	t.conv.readBy(&step)
	if t.cfg.StreamText && !t.cfg.LocalModel {
		step.StreamTo = workflow.GetInfo(ctx).WorkflowExecution.ID
	}
	t.streamed = ""
	start := workflow.Now(ctx)
	res, err := runModelStep(ctx, t.cfg, step)
	t.stepDone = stepIdx
	t.traceChat(ctx, stepIdx, start, res, err)
	return res, err
}

func (t *turn) ref() protocol.TurnRef {
	return protocol.TurnRef{Sequence: t.in.Sequence, TurnID: t.in.TurnID}
}

func (t *turn) step(i int) protocol.StepRef {
	return protocol.StepRef{Sequence: t.in.Sequence, StepIndex: i, TurnID: t.in.TurnID}
}

// The turn's events.

// messageReceived records a user message the turn reads. A message the
// session offered while the turn ran (dlv) joins the turn's deliveries
// first; the turn's own message is one already.
func (t *turn) messageReceived(ctx workflow.Context, dlv, text string) {
	if dlv != "" {
		t.log.deliveries = append(t.log.deliveries, dlv)
	}
	t.log.emit(ctx, protocol.MessageReceived, protocol.MessageReceivedData{Message: text, Sequence: t.in.Sequence, TurnID: t.in.TurnID})
}

func (t *turn) stepStarted(ctx workflow.Context, i int) {
	t.stepStart, t.stepOpen = workflow.Now(ctx), true
	t.log.emit(ctx, protocol.StepStarted, protocol.StepStartedData{ModelID: t.cfg.ModelID, StepRef: t.step(i)})
}

func (t *turn) stepCompleted(ctx workflow.Context, i int, finish string, usage protocol.StepUsage) {
	t.log.emit(ctx, protocol.StepCompleted, protocol.StepCompletedData{FinishReason: finish, Usage: &usage, StepRef: t.step(i)})
	t.traceStep(ctx, i, finish, usage)
}

func (t *turn) actionsRequested(ctx workflow.Context, i int, calls []model.ToolCall) {
	actions := make([]protocol.ToolCallAction, len(calls))
	for j, c := range calls {
		actions[j] = toolCallAction(c)
	}
	t.log.emit(ctx, protocol.ActionsRequested, protocol.ActionsRequestedData{Actions: actions, StepRef: t.step(i)})
}

// turnWaiting says what the turn waits on: "input" (people) or "tasks"
// (delegated jobs).
func (t *turn) turnWaiting(ctx workflow.Context, on string) {
	u := t.usage
	t.log.emit(ctx, protocol.TurnWaiting, protocol.TurnWaitingData{On: on, Sequence: t.in.Sequence, TurnID: t.in.TurnID, Usage: &u})
}

// stepFailed ends the turn after the model failed.
func (t *turn) stepFailed(ctx workflow.Context, i int, msg string) (turnOutput, error) {
	t.log.emit(ctx, protocol.StepFailed, protocol.StepFailedData{Code: codeModelError, Message: msg, StepRef: t.step(i)})
	return t.turnFailed(ctx, codeModelError, msg)
}

// turnFailed ends the turn with turn.failed.
func (t *turn) turnFailed(ctx workflow.Context, code, msg string) (turnOutput, error) {
	t.endTasks(ctx, protocol.TaskCancelTurnEnded)
	t.readLeftovers(ctx)
	t.failCode = code
	t.log.emit(ctx, protocol.TurnFailed, protocol.TurnFailedData{Code: code, Message: msg, Sequence: t.in.Sequence, TurnID: t.in.TurnID})
	return t.finish(ctx, signals.TurnStatusFailed, "", msg)
}

func (t *turn) resolutionFailed(ctx workflow.Context, err error) (turnOutput, error) {
	if ctx.Err() != nil {
		return t.cancelled(ctx)
	}
	return t.turnFailed(ctx, codeResolution, errorMessage(err))
}

// cancelled records the end of a cancelled turn.
func (t *turn) cancelled(ctx workflow.Context) (turnOutput, error) {
	t.endTasks(ctx, protocol.TaskCancelTurnCancelled)
	t.readLeftovers(ctx)
	t.log.emit(ctx, protocol.TurnCancelled, t.ref())
	return t.finish(ctx, signals.TurnStatusCancelled, "", "the turn was cancelled")
}

// readLeftovers reads, in order mode, the messages the turn took and its
// model did not reach before it failed or was cancelled: the session told
// their senders this turn reads them. They join the conversation, so the
// next turn's model sees them.
func (t *turn) readLeftovers(ctx workflow.Context) {
	if t.ordered && len(t.steering) > 0 {
		t.readSteering(ctx)
	}
}

func (t *turn) outcome() signals.TurnOutcome {
	status := t.status
	if !t.finished {
		status = signals.TurnStatusWaiting
	}
	return signals.TurnOutcome{
		Status: status, Reply: t.reply, Error: t.errMsg, Data: t.data,
		FirstEvent: t.log.base, LastEvent: t.log.total() - 1,
	}
}

// finish ends the turn; handlers waiting on it (respond with Wait) return
// before the workflow completes.
func (t *turn) finish(ctx workflow.Context, status, reply, errMsg string) (turnOutput, error) {
	t.closing = true
	t.finished, t.status, t.reply, t.errMsg = true, status, reply, errMsg
	countTurn(ctx, status)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	_ = workflow.Await(dctx, func() bool { return workflow.AllHandlersFinished(dctx) })
	t.drainRelays(dctx) // proxy.go
	out := turnOutput{
		Events:        t.log.events,
		Usage:         t.usage,
		Outcome:       t.outcome(),
		ApprovedTools: t.board.approved,
		Taken:         t.taken,
		GrantedAt:     t.grantedAt,
	}
	if t.in.Stubs != nil {
		out.StubPositions = t.in.Stubs.Positions
	}
	if t.taskCalls || len(t.in.Tasks) > 0 {
		out.Tasks, out.TasksNote = t.heldTasks(), t.lastNote
	}
	t.conv.storePending(dctx, t.in.SessionID, t.in.TurnID)
	ref := t.conv.ref
	out.Conversation = &ref
	t.traceTurn(ctx, status)
	// The session acts on this result, which commits with the turn's final
	// workflow task (docs/architecture.md, "Exactly once").
	return out, nil
}

// resolveTools runs the resolvers of one scope (recorded in history).
func resolveTools(ctx workflow.Context, in work.ResolveInput) ([]work.DynamicTool, error) {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{work.ErrTypeResolve}},
	})
	var out work.ResolveOutput
	err := workflow.ExecuteLocalActivity(lctx, work.ResolveToolsName, in).Get(ctx, &out)
	return out.Tools, err
}

// mergeDynamic joins the scopes' tools; one name from two resolvers is an error.
func mergeDynamic(sets ...[]work.DynamicTool) ([]work.DynamicTool, error) {
	var out []work.DynamicTool
	owner := map[string]string{}
	for _, set := range sets {
		for _, d := range set {
			if prev, dup := owner[d.Name]; dup {
				return nil, fmt.Errorf("resolvers %q and %q both return a tool named %q; tool names must be unique, rename one", prev, d.Resolver, d.Name)
			}
			owner[d.Name] = d.Resolver
			out = append(out, d)
		}
	}
	return out, nil
}

func toolCallAction(c model.ToolCall) protocol.ToolCallAction {
	input := c.Input
	if !isJSONObject(input) {
		// The wire shape requires an object; keep what the model sent visible.
		input = mustJSON(map[string]string{"$raw": string(c.Input)})
	}
	return protocol.ToolCallAction{CallID: c.ID, Input: input, Kind: "tool-call", ToolName: c.Name}
}

func runModelStep(ctx workflow.Context, cfg Config, in work.ModelStepInput) (work.ModelStepOutput, error) {
	var out work.ModelStepOutput
	err := modelActivity(ctx, cfg, work.ModelStepName, in).Get(ctx, &out)
	return out, err
}

// modelActivity runs an activity that calls the model (a step, a
// compaction) as the agent runs model steps: local or regular, with the
// model's timeout and retries.
func modelActivity(ctx workflow.Context, cfg Config, name string, in any) workflow.Future {
	if cfg.LocalModel {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: cfg.ModelTimeout, RetryPolicy: cfg.modelRetry(),
		}), name, in)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: cfg.ModelTimeout, RetryPolicy: cfg.modelRetry(),
	}), name, in)
}

// setStatus records the turn's status (and the tools it waits on): in the
// state its attribute writer follows (changeSearchWrites), or upserted
// at once as before.
func (t *turn) setStatus(ctx workflow.Context, status string, tools []string) {
	if t.vis {
		t.visStatus, t.visTools = status, tools
		return
	}
	setStatus(ctx, t.cfg, t.in.SessionID, status, tools)
}

// visState is what the turn's search attributes say: its status, its
// session, and while it has open requests the inbox's attributes.
func (t *turn) visState() visState {
	v := visState{status: t.visStatus, tools: t.visTools, session: t.in.SessionID}
	if v.status == statusWaitingInput {
		v.tools = t.board.waitingTools() // as the requests settle one by one
	}
	if t.fromTurns && v.status != statusWaitingInput {
		// A request a subagent proxied is the root's to answer: the turn
		// waits on it as on its own, as its session's mirror says (typed.go).
		if tools := t.proxiedTools(); len(tools) > 0 {
			v.status, v.tools = statusWaitingInput, tools
		}
	}
	if t.visInbox {
		v.inbox, v.requester, v.kinds, v.parkedAt = t.board.inboxAttributes()
	}
	return v
}
