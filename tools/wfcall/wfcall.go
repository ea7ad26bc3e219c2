// Package wfcall is for the authors of workflows that eve runs as tools
// (tools.DefineWorkflow): a workflow imports it to learn which call it
// runs for and to ask that call's person a question, answered through
// eve's usual routes (the inbox, the respond endpoint, the console). A
// workflow that does not import it works as a tool all the same.
//
//	func Provision(ctx workflow.Context, in Input) (Result, error) {
//		if _, ok := wfcall.From(ctx); ok {
//			ans, err := wfcall.Ask(ctx, "size", wfcall.Question{Prompt: "Which size?",
//				Options: []protocol.InputOption{{ID: "s", Label: "Small"}, {ID: "l", Label: "Large"}}})
//			...
//		}
//	}
package wfcall

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Call is the eve call a workflow runs for.
type Call struct {
	SessionID string
	// TurnID is the turn's id; for a tools API execution it is the
	// execution's id, like SessionID (nobody can be asked there).
	TurnID string
	CallID string
	Tool   string
	// Parent is the workflow that started this one (the turn's or the
	// execution's).
	Parent workflow.Execution
	// AskTag is the tag a subagent's turn puts in its questions' request
	// ids (signals.AskID); empty for a root turn's call.
	AskTag string
}

// From reads the call from the workflow's memo and parent; ok is false
// for a workflow eve did not start as a tool.
func From(ctx workflow.Context) (Call, bool) {
	info := workflow.GetInfo(ctx)
	if info.ParentWorkflowExecution == nil || info.Memo == nil {
		return Call{}, false
	}
	read := func(k string) string {
		var s string
		if p, ok := info.Memo.GetFields()[k]; ok {
			_ = converter.GetDefaultDataConverter().FromPayload(p, &s)
		}
		return s
	}
	c := Call{SessionID: read(signals.MemoSession), TurnID: read(signals.MemoTurn), CallID: read(signals.MemoCall), Tool: read(signals.MemoTool),
		Parent: *info.ParentWorkflowExecution, AskTag: read(signals.MemoAskTag)}
	if c.CallID == "" || c.SessionID == "" {
		return Call{}, false
	}
	return c, true
}

// Question is what Ask puts to the person: a prompt, and options and/or
// free text.
type Question struct {
	Prompt        string
	Display       string
	Options       []protocol.InputOption
	AllowFreeform bool
}

// Answer is how the question was settled: Outcome (answered, expired,
// cancelled, ...) and, when answered, the option chosen or the text.
type Answer struct {
	Outcome  string
	OptionID string
	Text     string
}

// ErrNoPerson: the workflow does not run for a turn's call (not started
// by eve, or by a tools API execution), so nobody can be asked.
var ErrNoPerson = errors.New("wfcall: this workflow does not run for a session's call: nobody can be asked")

// Ask puts q to the person of the session whose call this workflow runs
// for and waits for the settlement. The turn records input.requested
// (request id "ask_<call id>_<key>", or "ask_<tag>_<call id>_<key>" in a
// subagent's turn: signals.AskID) and parks; the answer arrives
// through the usual respond routes, and the turn signals it back. key
// names the question within the workflow (letters, digits, "_" and "-"):
// asking the same key again, on a replay or a retry, is the same
// question. Ask one question at a time.
func Ask(ctx workflow.Context, key string, q Question) (Answer, error) {
	c, ok := From(ctx)
	if !ok || c.TurnID == "" || c.TurnID == c.SessionID {
		return Answer{}, ErrNoPerson
	}
	if key == "" || strings.TrimSpace(q.Prompt) == "" {
		return Answer{}, errors.New("wfcall: a question needs a key and a prompt")
	}
	id := signals.AskID(c.AskTag, c.CallID, key)
	req := protocol.InputRequest{Kind: protocol.KindQuestion, RequestID: id, Prompt: q.Prompt, Display: q.Display,
		Options: q.Options, AllowFreeform: q.AllowFreeform}
	if err := workflow.SignalExternalWorkflow(ctx, c.Parent.ID, c.Parent.RunID, signals.SignalAsk,
		signals.AskRequest{CallID: c.CallID, Request: req}).Get(ctx, nil); err != nil {
		return Answer{}, err
	}
	ch := workflow.GetSignalChannel(ctx, signals.SignalAnswered)
	for {
		var a signals.Answered
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &a) })
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		sel.Select(ctx)
		if ctx.Err() != nil {
			return Answer{}, ctx.Err()
		}
		if a.RequestID != id {
			continue // an earlier question's late answer
		}
		ans := Answer{Outcome: a.Resolution.Outcome}
		if r := a.Resolution.Response; r != nil {
			ans.OptionID, ans.Text = r.OptionID, r.Text
		}
		return ans, nil
	}
}
