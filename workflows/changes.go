package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/signals"
)

// The one table of replay-affecting changes, as the Temporal Go SDK keeps
// its SDK flags in one file (internal_flags.go). Every workflow.GetVersion
// in this package names its change id from here and nowhere else: an id
// is declared once, says what it changed, and names the saved histories
// (e2e/testdata/histories) that replay its new path. A history recorded
// before a change replays the old path, which is why no id is ever
// removed or reused. changes_test.go holds the table to that.
//
// To add a change: declare its id below (prefix "eve-"), add a row to
// changes, branch on workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1),
// and record histories of the new path under the newest prefix
// (CONTRIBUTING.md, "A replay-affecting workflow change").
const (
	changeResponses     = "eve-approval-responses"
	changeOffers        = "eve-approval-offers"
	changeAuto          = "eve-approval-auto"
	changeInbox         = "eve-inbox"
	changeLifetime      = "eve-session-lifetime"
	changeLimits        = "eve-session-limits"
	changeDeadlines     = "eve-input-deadlines"
	changeTasks         = "eve-task-events"
	changeAskApproval   = "execution-ask-approval" // released without the eve- prefix; kept as recorded
	changeClientInput   = "eve-client-input"
	changeEdits         = "eve-approval-edits"
	changeDecisions     = "eve-decision-record"
	changeAsk           = "eve-call-asks"
	changeFollowUps     = "eve-input-followups"
	changeRequestTimes  = "eve-input-requested-times"
	changeOrder         = "eve-message-order"
	changeStubs         = "eve-tool-stubs"
	changeWorkflowTools = "eve-workflow-tools"
	changeNexusTools    = "eve-nexus-tools"
	changeWorkflowAsk   = "eve-workflow-tool-asks"
	changeDeniedResult  = "eve-denied-result"
	changeSearchWrites  = "eve-search-writes"
	changeTaskCalls     = "eve-tasks"
	changeSubagents     = "eve-subagents"
	changeFirstMessage  = "eve-first-message"
	changeOutputSchema  = "eve-output-schema"
	changeCodeAgents    = "eve-code-agents"
	// changeTaskCancelUpdate: the turn's task cancel Update (marker
	// recorded by its handler, so a history with such an Update says so).
	changeTaskCancelUpdate = "eve-task-cancel-update"
	// changeProxyInput: a subagent's people in the loop reach the root.
	changeProxyInput = "eve-subagent-proxy-input"
	// changeSubagentOrigin: a child session knows its root and path.
	changeSubagentOrigin = "eve-subagent-origin"
	// changeSubagentCancel: a stopped subagent call cancels the child's turn.
	changeSubagentCancel = "eve-subagent-cancel"
	// changeSubagentJoin: a call to a working child joins its turn.
	changeSubagentJoin = "eve-subagent-join"
	// changeSubagentUsage: a child's usage counts against its parent.
	changeSubagentUsage = "eve-subagent-usage"
	// changeSubagentRequestIDs: a subagent's turn tags its request ids.
	changeSubagentRequestIDs = "eve-subagent-request-ids"
	// changeSubagentAskIDs: a subagent's turn tags its tools' question ids.
	changeSubagentAskIDs = "eve-subagent-ask-ids"
	// changeParkWrites: an answered park is not written to search
	// attributes (recorded where a workflow first leaves waiting-input).
	changeParkWrites = "eve-park-writes"
	// changeProxyTyped: a typed answer reaches a proxied prompt.
	changeProxyTyped = "eve-subagent-typed-answers"
	// changeProxyTaskID: a proxied input.requested carries the taskId.
	changeProxyTaskID = "eve-subagent-proxy-task-id"
	// changeTurnVersions: no GetVersion; the turn's input (Versions)
	// carries it, and the histories below replay it.
	changeTurnVersions = "eve-turn-versions"
	// changeInputVersions: no GetVersion either; a session's input and
	// its turns' inputs carry Versions = 2 (inputVersions).
	changeInputVersions = "eve-input-versions"
	// changeQuietResume: a turn does not tell its session of an un-park.
	changeQuietResume = "eve-quiet-resume"
	// changeCodeAgentProxy: a code-opened child's people in the loop
	// reach the root.
	changeCodeAgentProxy = "eve-code-agent-proxy"
	// changeStatusFromTurns: a session's status is its running turn's.
	changeStatusFromTurns = "eve-status-from-turns"
	// changeTurnDecides: the running turn decides every message that
	// arrives while it runs; the session keeps no mirror of its prompts.
	changeTurnDecides = "eve-turn-decides"
)

// inputVersions is the Versions eve's starters put in the inputs of the
// workflows they start (signals.SessionInput.Versions for a session;
// turnInput.Versions for a turn): such a workflow takes every change of
// inputGenerations up to it as on without a version marker.
const inputVersions = signals.SessionVersions

// inputGenerations names the changes a workflow takes from its input's
// Versions, each with the first Versions that carries it. A marker costs a
// history event and, with it, the SDK's TemporalChangeVersion upsert: a
// Visibility write on the server (docs/performance.md). Only a change that
// every worker reading such an input knows may be listed, and never at a
// lower generation than it was first given.
var inputGenerations = map[string]int{
	// changeTurnVersions: a turn's start.
	changeResponses: 1, changeTasks: 1, changeLimits: 1, changeOrder: 1, changeInbox: 1, changeSearchWrites: 1,
	// changeInputVersions: the rest a session or a turn decides on its
	// usual paths (a park, an answer, a deadline, tasks, subagents).
	changeLifetime: 2, changeFirstMessage: 2, changeOffers: 2, changeParkWrites: 2,
	changeDecisions: 2, changeRequestTimes: 2, changeFollowUps: 2, changeDeadlines: 2,
	changeAsk: 2, changeWorkflowAsk: 2, changeDeniedResult: 2, changeTaskCalls: 2, changeOutputSchema: 2,
	changeSubagents: 2, changeProxyInput: 2, changeSubagentOrigin: 2, changeSubagentCancel: 2,
	changeSubagentJoin: 2, changeSubagentUsage: 2, changeSubagentRequestIDs: 2, changeCodeAgents: 2,
	// 3: a session's status from its turns, and the turn's quiet resume
	// without its marker.
	changeStatusFromTurns: 3, changeQuietResume: 3,
	// 4: the turn decides the messages that arrive while it runs; a
	// parent turn's first proxied request records no markers.
	changeTurnDecides: 4, changeProxyTyped: 4, changeProxyTaskID: 4,
}

// changeOn reports whether change id is on for a workflow whose input
// carries versions: at once when the input's generation carries it
// (inputGenerations; the input is in the start event, so a replay reads
// the same), else by GetVersion, whose marker the history keeps. A marker
// recorded by a worker that did not read the input is skipped on replay
// (the SDK skips version markers nobody asks for).
func changeOn(ctx workflow.Context, versions int, id string) bool {
	if fromInput(versions, id) {
		return true
	}
	return workflow.GetVersion(ctx, id, workflow.DefaultVersion, 1) >= 1
}

// fromInput reports whether change id is on by the input's generation
// alone: for a change that only workflows started with it take, so that
// none decides it by a marker (changeStatusFromTurns).
func fromInput(versions int, id string) bool {
	g := inputGenerations[id]
	return g > 0 && versions >= g
}

// change is one row of the table: an id, the release that brought it,
// what its new path does, and the saved histories that cover that path
// (file name globs under e2e/testdata/histories).
type change struct {
	id        string
	release   string
	what      string
	histories []string
}

var changes = []change{
	{changeResponses, "0.3.0", "the turn's approval model: response policies, approval.candidate and approval.settled, the approver in the tool's context, the prompt from the input; 0.2.0 turns let anyone the API let through settle directly",
		[]string{"v0.3.0-turn-four-eyes*.json", "v0.3.0-turn-approval.json"}},
	{changeOffers, "0.3.0", "the session offers other people's approval answers to the turn (see eve-approval-responses)",
		[]string{"v0.3.0-session-four-eyes-typed.json"}},
	{changeAuto, "0.3.0", "approval.Auto's review runs as a local activity; a review the version refuses fails closed (a person is asked)",
		[]string{"v0.3.0-turn-auto-*.json"}},
	{changeInbox, "0.3.0", "the turn publishes its open requests in search attributes (EveInbox and the rest) for the inbox",
		[]string{"v0.3.0-turn-inbox.json"}},
	{changeLifetime, "0.3.0", "the session's lifetime: a durable timer ends it at ExpiresAt",
		[]string{"v0.3.0-session-limits-lifetime.json"}},
	{changeLimits, "0.3.0", "the turn holds its session's limits (a session-limit request), and the session keeps its limit window",
		[]string{"v0.3.0-turn-limit-*.json", "v0.3.0-session-limits-lifetime.json"}},
	{changeDeadlines, "0.3.0", "a request with a deadline starts a durable timer and settles expired when it fires unanswered",
		[]string{"v0.3.0-turn-deadline-*.json"}},
	{changeTasks, "0.3.0", "task.started and task.settled around a turn's delegated calls, so a cancelled call reads as cancelled",
		[]string{"v0.3.0-turn-delegated.json"}},
	{changeAskApproval, "0.3.0", "a tools-API execution of a tool that needs approval asks its caller instead of refusing",
		[]string{"v0.3.0-execution-approval-*.json"}},
	{changeClientInput, "0.4.0", "client input rounds reach the tool in an execution; a round that asks keeps its requests as output",
		[]string{"v0.4.0-execution-client-*.json"}},
	{changeEdits, "0.4.0", "approve with edits: policies judge the edited input, the call runs with it, the model reads a note; asked only when an edit is applied",
		[]string{"v0.4.0-turn-approval-edited.json"}},
	{changeDecisions, "0.4.0", "decision.recorded after each input.resolved, one per resolution",
		[]string{"v0.4.0-turn-decision-*.json"}},
	{changeAsk, "0.4.0", "a running call asks its person (tools.Context.Ask: a remote MCP server's elicitation)",
		[]string{"v0.4.0-turn-ask-*.json"}},
	{changeFollowUps, "0.4.0", "reminders before a request's deadline (input.reminder) and escalation to a second group (approval.escalated), as durable timers",
		[]string{"v0.4.0-turn-escalated.json", "v0.4.0-turn-request-deadline-*.json"}},
	{changeOrder, "0.5.0", "messages are read in the order the session accepted them: a message accepted while a turn runs is offered to it one at a time (TurnMessage.Ack) and the turn answers whether it took it (eve.turn.taken), or it waits in the queue behind the others; the turn reads every message it took, even when it fails or is cancelled",
		[]string{"v0.5.0-session-ordered-*.json", "v0.5.0-turn-ordered-*.json"}},
	{changeRequestTimes, "0.5.0", "input.requested carries each request's deadline, next reminder and escalation time, when it has any",
		[]string{"v0.5.0-turn-deadline-*.json", "v0.5.0-turn-request-deadline-*.json", "v0.5.0-turn-escalated.json"}},
	{changeStubs, "0.5.0", "eve's tool stubs: a session's rules settle matching calls with a recorded outcome (a SideEffect) instead of running the tool",
		[]string{"v0.5.0-turn-stubs*.json"}},
	{changeDeniedResult, "0.5.0", "a denied call's result (what the model reads) has eve's shape: {approval: {requestId, status}, code, message, tool: {result: \"not_run\"}} instead of {error, code, reason}",
		[]string{"v0.5.0-turn-denied-*.json"}},
	{changeSearchWrites, "0.5.0", "search attributes are written from the workflow's state, only the keys that changed, at most once per workflow task: a session's status, a turn's status and inbox in one upsert; a session starts its turns marked running (their start command carries the attributes)",
		[]string{"v0.5.0-session-search-writes*.json", "v0.5.0-turn-search-writes*.json"}},
	{changeWorkflowTools, "0.5.0", "workflow tools (tools.DefineWorkflow): a call starts the app's workflow as a child workflow (id signals.WorkflowToolID) and settles with its result; before it, such a call had no runner",
		[]string{"v0.5.0-turn-workflow-*.json", "v0.5.0-execution-workflow*.json"}},
	{changeNexusTools, "0.5.0", "Nexus tools (tools.DefineNexus): a call runs an operation behind a Nexus endpoint and settles with its result; before it, such a call had no runner",
		[]string{"v0.5.0-turn-nexus-*.json"}},
	{changeWorkflowAsk, "0.5.0", "a workflow tool's child asks its call's person (tools/wfcall: SignalAsk to the turn) and the turn signals it the settlement (signals.SignalAnswered)",
		[]string{"v0.5.0-turn-workflow-asks.json"}},
	{changeTaskCalls, "0.5.0", "tasks (tools.AsTask): a task call's result is a receipt and its work runs in a coroutine of the turn; results reach the model as a task.result message at the next step boundary, with the [Tasks] note; eve__task_wait and eve__task_cancel; the turn parks while tasks work (turn.waiting on tasks); a cancelled or failed turn cancels its tasks; a task's deadline settles it failed; resumable tasks take further calls by taskId, and the session keeps them idle between turns (turnInput.Tasks, turnOutput.Tasks: fields a session without tasks never sets, so its commands are unchanged)",
		[]string{"v0.5.0-turn-task-*.json", "v0.5.0-session-task-*.json"}},
	{changeSubagents, "0.5.0", "subagents (agent.Agent.Subagents): a subagent's call is a resumable task of kind agent whose first call starts a child session (the session workflow on the subagent's task queue, id signals.SubagentSessionID, parent-close ABANDON) and records agent.started; each call signals the child its message (eve.agent.message) and settles with the child turn's reply (eve.agent.reply); a session answers a parent's message when its turn ends; the session keeps a subagent's task as kind agent between turns",
		[]string{"v0.5.0-turn-subagent-*.json", "v0.5.0-session-subagent-*.json"}},
	{changeFirstMessage, "0.5.0", "a session started with its first message in its input (signals.SessionInput.First) queues it as turn 0 before anything else: a create answers once the start is recorded, without waiting for the session's first workflow task",
		[]string{"v0.5.0-session-first-message*.json"}},
	{changeTaskCancelUpdate, "0.5.0", "the turn's eve.task.cancel Update (POST /eve/v1/session/{id}/tasks/{taskId}/cancel): its handler stops one working task (task.settled cancelled, cancel.reason task_cancel) and the model reads a failed <task_result> saying it was stopped from outside; its validator refuses unknown and idle or settled tasks, recording nothing",
		[]string{"v0.5.0-turn-taskcancel-*.json"}},
	{changeProxyInput, "0.5.0", "people in the loop from any depth: a subagent's turn relays its input.requested, approval.candidate, approval.settled and input.resolved to its parent turn (eve.agent.input), which records them on its own stream (the requests with the child's ids and the parent's callId) and routes the answers it is given for them down to the child turn (eve.respond signal); the child decides by its own policies",
		[]string{"v0.5.0-turn-subagent-proxied-*.json", "v0.5.0-turn-subagent-killed.json", "v0.5.0-turn-subagent-killed-child.json"}},
	{changeSubagentOrigin, "0.5.0", "a parent turn starts a subagent's child session with its origin (the root session and the path of subagents down to it) in its input and memo (signals.MemoOrigin); the child session passes it to each turn, whose inbox memo and decision.recorded name the root, path and depth",
		[]string{"v0.5.0-turn-subagent-origin-*.json", "v0.5.0-turn-subagent-killed.json"}},
	{changeSubagentCancel, "0.5.0", "a subagent's call that is stopped (eve__task_cancel, the task cancel API, its turn cancelled or failed) withdraws the requests its child proxied that are still open (input.resolved, outcome cancelled) and signals the child session eve.agent.cancel, which cancels the child's turn that reads the call's message (its conversation stays) or drops the message if it still waits; a parent records a child's resolution of a proxied question too, not only a tool approval's",
		[]string{"v0.5.0-turn-subagent-cancel*.json", "v0.5.0-session-subagent-cancel*.json"}},
	{changeSubagentJoin, "0.5.0", "a subagent's call by taskId while the task works joins the child's current turn: the parent runs it at once (not queued behind the working call) and the child session offers its message to the running turn as a steering message from the call's caller; the turn that reads it answers every call it read with its reply; one that ends first leaves it to a turn of its own",
		[]string{"v0.5.0-turn-subagent-joined*.json", "v0.5.0-session-subagent-joined*.json"}},
	{changeSubagentUsage, "0.5.0", "usage roll-up: a subagent's session reports its turns' token usage (its own subagents' included) with each reply to a parent (signals.AgentReply.Usage; what no delivered reply carried yet is kept, sessionState.Unreported), and the parent turn adds it to its own usage as the reply arrives: its session limits, turn.waiting, its output and so session.waiting count it",
		[]string{"v0.5.0-turn-subagent-usage*.json", "v0.5.0-session-subagent-usage*.json", "v0.5.0-turn-subagent-killed.json", "v0.5.0-session-subagent-killed-child.json"}},
	{changeSubagentRequestIDs, "0.5.0", "a subagent's turn (turnInput.CalledBy) puts its session's tag (s + 8 hex digits of a hash of the session id) in its approval and question request ids (apr_<tag>_<callId>, inp_<tag>_<callId>), so requests it proxies to the root never share an id with the root's or a sibling's (models number call ids per conversation); recorded at its first such request",
		[]string{"v0.5.0-turn-subagent-request-ids*.json", "v0.5.0-turn-subagent-killed-child.json"}},
	{changeSubagentAskIDs, "0.5.0", "a subagent's turn (turnInput.CalledBy), as it first runs a call that may ask its person (an activity's or a delegated job's tools.Context.Ask, a workflow tool's wfcall.Ask), hands its calls its session's tag (work.ExecuteToolInput.AskTag; a workflow tool's child the memo signals.MemoAskTag), so their questions' ids are ask_<tag>_<callId>_<n> (signals.AskID) and a tool's question it proxies to the root never shares an id with a sibling's; the turn takes a call's question tagged or untagged",
		[]string{"v0.5.0-turn-subagent-ask-ids*.json", "v0.5.0-turn-subagent-killed-child.json", "v0.5.0-turn-subagent-killed-crunch.json"}},
	{changeParkWrites, "0.5.0", "a workflow whose open requests were answered (waiting-input to running) does not upsert that: its search attributes keep waiting-input until its next other change (idle, a new park, waiting-tasks), the turn's inbox memo says it has no open request (the inbox drops it) and the session's status memo (signals.MemoStatus, written from then on) says running: one billable upsert fewer per park in each of the two workflows",
		[]string{"v0.5.0-session-park-writes*.json", "v0.5.0-turn-park-writes*.json"}},
	{changeTurnVersions, "0.5.0", "a session starts its turns with turnInput.Versions = 1, and such a turn takes eve-approval-responses, eve-task-events, eve-session-limits, eve-message-order, eve-inbox and eve-search-writes as on from its input instead of a version marker each (up to 6 markers and the SDK's 6 TemporalChangeVersion upserts fewer per turn, each a Visibility write on the server); a turn without it (started before) decides them by GetVersion as before. Not a GetVersion: the input is in the turn's start event, so a replay reads it back",
		[]string{"v0.5.0-turn-versions-*.json"}},
	{changeInputVersions, "0.5.0", "a session started by eve's starters (the API's sessions.Service, a parent turn for its subagent, a tool's code for its agent, the session itself when it continues as new) has signals.SessionInput.Versions = 2 and starts its turns with turnInput.Versions = 2; such a workflow takes every change of inputGenerations as on from its input instead of a version marker each (a session's up to 5 markers and the SDK's upserts with them at its start, a park's 2 and its answer's 2 in the turn and 1 in the session); a workflow without it decides them by GetVersion as before. Not a GetVersion: the input is in the start event",
		[]string{"v0.5.0-input-versions-*.json"}},
	{changeQuietResume, "0.5.0", "a turn whose last open request closes (answered, expired, withdrawn) does not signal its session (eve.turn.inputs): the session's mirror of the open requests and its status keep the park until the turn's end or its next park, and the sessions listing reads a waiting-input session against its running turn's inbox memo; decided at the turn's first park, only where the inbox memo exists or no search attributes are written. One signal and one session workflow task fewer per answered park",
		[]string{"v0.5.0-quiet-resume-*.json"}},
	{changeCodeAgentProxy, "0.5.0", "a session a tool's code opens with a subagent (tools.Context.Agent) relays its turns' people-in-the-loop events to the call's turn (signals.SendRequest.RelayTo: the child's turnInput.CalledBy), which records them from the first agent.started it records on, as a model-called subagent's: the root's person answers the child's approvals and questions, and the child's own policies decide them",
		[]string{"v0.5.0-*code-agent-proxy*.json"}},
	{changeOutputSchema, "0.5.0", "structured output (a message's outputSchema): the turn offers the model eve__reply with the schema, ends on a valid call with result.completed and the value in its outcome (Data), answers an invalid or premature one and goes on, and fails with OUTPUT_SCHEMA_NOT_FULFILLED on an answer in prose; asked only when the message sent a schema, so a turn without one records no marker",
		[]string{"v0.5.0-turn-output-schema-*.json", "v0.5.0-session-output-schema-*.json"}},
	{changeProxyTyped, "0.5.0", "a typed answer to a proxied prompt (decided at a turn's first proxied request): the parent turn keeps the requests its children proxied, its mirror to the session (signals.TurnInputs) lists the open ones among its own in the order asked (a session-limit prompt first), so the session's status says waiting-input and routes a typed message to the turn; a message that answers the first open prompt by text (protocol.ResolveText), when that is a proxied request, is taken (message.received) and its answer goes down to the child turn that asked (eve.respond, as the sender's), unless the child's rule (signals.AgentInput.Rules) leaves the approval to its requester and the sender is not: the message waits for the turn's end; an answer to a proxied question (typed or through inputResponses) resolves it on the parent in the workflow task that sends it down, not once the signal is delivered (when the child's relayed resolution could be recorded too)",
		[]string{"v0.5.0-turn-subagent-typed-*.json", "v0.5.0-session-subagent-typed*.json"}},
	{changeProxyTaskID, "0.5.0", "a proxied input.requested on the parent carries the taskId of the parent's call whose child asked (eve's streaming docs: an input.requested from a task's run carries its taskId)",
		[]string{"v0.5.0-turn-subagent-typed-approved.json", "v0.5.0-turn-subagent-typed-depth2*.json"}},
	{changeCodeAgents, "0.5.0", "a turn of an agent with subagents records agent.started for each session a tool's code opened with one (tools.Context.Agent; the call's activity signals eve.agent.opened), once per child session",
		[]string{"v0.5.0-turn-code-agent-announced.json"}},
	{changeStatusFromTurns, "0.5.0", "a session started with Versions = 3 (signals.SessionVersions) writes no status of its own (EveStatus, EveTools, the status memo): its running turn's attributes are its status, and a session without one is idle (the sessions listing reads the turns, internal/sessions/list.go); the session starts its turns marked running whenever its namespace has the attributes, and such a turn (turnInput.Versions = 3) writes its status even on a worker without SearchAttributes when its start carries them, and, without the inbox memo, says in its own status memo that an answered park runs on (changeParkWrites). Decided by the input alone, never by a marker: a session started before it writes its status as before. Two billable upserts fewer per parked turn, one per turn; and eve-quiet-resume joins generation 3 (no marker)",
		[]string{"v0.5.0-status-from-turns-*.json"}},
	{changeTurnDecides, "0.5.0", "a session started with Versions = 4 (signals.SessionVersions; it keeps its messages in order, eve-message-order) keeps no mirror of its running turn's open requests: it offers the turn every message that arrives while it runs (one at a time, as before, AnswerOnly behind messages accepted earlier), and the turn decides each by the rules the session's mirror applied (another person's message only answers a first open prompt that is a judged tool approval; a queued message with nothing open waits); the session starts the turn with turnInput.Decides, and with Report when someone waits for its outcome (SendRequest.Wait), or offers a waited-for message with signals.TurnMessage.Report: only such a turn tells its session its open requests (eve.turn.inputs) when it parks. Decided by the input alone, never by a marker: a session started before it, and its turns, keep the mirror. One signal and one session workflow task fewer per park nobody waits on; and eve-subagent-typed-answers and eve-subagent-proxy-task-id join generation 4 (a parent turn's first proxied request records no marker)",
		[]string{"v0.5.0-turn-decides-*.json"}},
}
