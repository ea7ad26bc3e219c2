package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Sessions a tool's code opens with a subagent (tools.Context.Agent,
// changeCodeAgents): the call's activity opens the child itself and
// signals its turn (signals.SignalAgentOpened), which records
// agent.started on the parent's stream, as eve announces a session a
// workflow tool opens with ctx.agent: once per child (a retried attempt
// re-sends the signal).

// listenCodeAgents records the agent.started of the sessions the turn's
// calls open. Only an agent with subagents listens (Config.CodeAgents).
func (t *turn) listenCodeAgents(ctx workflow.Context) {
	if !t.cfg.CodeAgents || !t.changeOn(ctx, changeCodeAgents) {
		return
	}
	seen := map[string]bool{}
	ch := workflow.GetSignalChannel(ctx, signals.SignalAgentOpened)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var d protocol.AgentStartedData
			if !ch.Receive(ctx, &d) {
				return
			}
			if seen[d.SessionID] || t.closing {
				continue
			}
			seen[d.SessionID] = true
			d.TurnID = t.in.TurnID
			t.log.emit(ctx, protocol.AgentStarted, d)
			t.listenCodeAgentInputs(ctx)
		}
	})
}

// listenCodeAgentInputs receives what the sessions the turn's code opened
// relay (their turns' people in the loop: signals.SendRequest.RelayTo),
// from the first one announced on (changeCodeAgentProxy), and records it
// as a model-called subagent's (takeAgentInput): the root's person answers
// it. A turn that also calls subagents receives them there already.
func (t *turn) listenCodeAgentInputs(ctx workflow.Context) {
	if t.agentInputs || !t.changeOn(ctx, changeCodeAgentProxy) {
		return
	}
	t.agentInputs = true
	ch := workflow.GetSignalChannel(ctx, signals.SignalAgentInput)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	workflow.Go(dctx, func(ctx workflow.Context) {
		for {
			var in signals.AgentInput
			if !ch.Receive(ctx, &in) {
				return
			}
			t.takeAgentInput(ctx, in) // proxy.go
		}
	})
}
