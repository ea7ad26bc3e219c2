package activities

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
)

// StreamFlushInterval coalesces text deltas: one signal per interval keeps
// a turn's history small while clients still see text as it is written.
const streamFlushInterval = 150 * time.Millisecond

// streamer returns the model's stream callback and a final flush. Deltas
// are best effort: message.completed remains the source of truth.
func (a *activitySet) streamer(ctx context.Context, in work.ModelStepInput) (model.Stream, func()) {
	if in.StreamTo == "" || a.Client == nil {
		return nil, func() {}
	}
	var (
		mu   sync.Mutex
		buf  strings.Builder
		last = time.Now()
	)
	send := func() {
		if buf.Len() == 0 {
			return
		}
		d := signals.TextDelta{StepIndex: in.StepIndex, Delta: buf.String()}
		buf.Reset()
		last = time.Now()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := a.Client.SignalWorkflow(sctx, in.StreamTo, "", signals.SignalTextDelta, d); err != nil {
			a.logger().Warn("stream text delta", "turn", in.TurnID, "err", err)
		}
	}
	stream := func(delta string) {
		mu.Lock()
		defer mu.Unlock()
		buf.WriteString(delta)
		if time.Since(last) >= streamFlushInterval {
			send()
		}
	}
	return stream, func() {
		mu.Lock()
		defer mu.Unlock()
		send()
	}
}
