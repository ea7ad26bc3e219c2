package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// Controls (cancel, clear, compact, reset) and compaction.

func validateControl(ctx workflow.Context, req signals.ControlRequest) error {
	switch req.Op {
	case signals.ControlCancel, signals.ControlClear, signals.ControlCompact, signals.ControlResetOp:
		return nil
	}
	return fmt.Errorf("unknown control op %q: want cancel, clear, compact or reset", req.Op)
}

func (s *session) control(ctx workflow.Context, req signals.ControlRequest) (signals.ControlResult, error) {
	switch req.Op {
	case signals.ControlCancel:
		if s.active == nil || (req.TurnID != "" && req.TurnID != s.active.TurnID) {
			return signals.ControlResult{Status: signals.ControlNoActiveTurn}, nil
		}
		s.cancelTurn()
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	case signals.ControlClear:
		s.clear(ctx)
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	case signals.ControlCompact:
		s.compact(ctx)
		return signals.ControlResult{Status: signals.ControlAccepted, SessionID: s.id}, nil
	default: // reset
		if s.active != nil {
			s.cancelTurn()
			s.dropPending()
		}
		s.st.Queue = nil
		s.offered = nil
		s.st.ApprovedTools = nil
		s.st.Tasks, s.st.TasksNote = nil, ""
		s.clear(ctx)
		return signals.ControlResult{Status: signals.ControlReset, PreviousSessionID: s.id, SessionID: s.id}, nil
	}
}

func (s *session) lastTurn() (int, string) {
	seq := s.st.NextSeq - 1
	if seq < 0 {
		seq = 0
	}
	return seq, signals.TurnID(seq)
}

// clear forgets the conversation; the event log stays.
func (s *session) clear(ctx workflow.Context) {
	s.st.Conversation = nil
	s.st.TasksNote = "" // the next [Tasks] note starts the new conversation's
	s.dropMessages = s.active != nil
	seq, tid := s.lastTurn()
	s.emitSession(ctx, protocol.ContextCleared, protocol.ContextClearedData{Sequence: seq, SessionID: s.id, TurnID: tid})
}

// compact replaces the stored conversation with a summary, now or, while
// a turn runs or a compaction does, after it.
func (s *session) compact(ctx workflow.Context) {
	if s.active != nil || s.compacting {
		s.compactAfterTurn = true
		return
	}
	s.compactStored(ctx)
}

// compactStored replaces the stored conversation with a summary (/compact).
// Turns wait while it runs.
func (s *session) compactStored(ctx workflow.Context) {
	s.st.TasksNote = "" // the note returns after compaction
	seq, tid := s.lastTurn()
	data := protocol.CompactionData{ModelID: s.st.Config.ModelID, Sequence: seq, SessionID: s.id, TurnID: tid}
	if s.st.Conversation != nil {
		before := s.st.Conversation.Tokens()
		data.UsageInputTokens = &before
	}
	s.log.emit(ctx, protocol.CompactionRequested, data)
	if s.st.Conversation != nil && !s.st.Conversation.Empty() {
		s.compacting = true
		out, err := runCompaction(ctx, s.st.Config.withDefaults(), work.CompactInput{SessionID: s.id, Conversation: *s.st.Conversation})
		s.compacting = false
		if err != nil {
			workflow.GetLogger(ctx).Warn("compaction failed; the conversation stays as it was", "session", s.id, "error", err)
			return
		}
		s.st.Conversation = &out.Conversation
		after := out.Conversation.Tokens()
		data.UsageInputTokens = &after
	}
	s.log.emit(ctx, protocol.CompactionCompleted, data)
}
