package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/evetest"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/signals"
)

// slowStreamer streams its answer in pieces, like a provider would.
type slowStreamer struct{}

func (slowStreamer) ID() string { return "test:slow" }
func (slowStreamer) Step(ctx context.Context, req model.Request, stream model.Stream) (model.Response, error) {
	parts := []string{"Streaming ", "text ", "arrives ", "in ", "pieces."}
	for _, p := range parts {
		if stream != nil {
			stream(p)
		}
		time.Sleep(120 * time.Millisecond)
	}
	return model.Response{Text: strings.Join(parts, ""), FinishReason: model.FinishStop}, nil
}

func TestStreamedTextBecomesMessageAppended(t *testing.T) {
	env := evetest.New(t)
	a := evetest.Agent(t, "rules: []")
	a.Model = slowStreamer{}
	a.LocalModel = false
	a.StreamText = true
	env.StartWorker(a) // with the env's client, which streams the deltas
	ctx := env.Ctx(30 * time.Second)
	res, err := env.Sessions.CreateAndSend(ctx, "", nil, signals.SendRequest{Message: "hi", Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	evs := env.Events(ctx, res.SessionID)
	var streamed strings.Builder
	appended := 0
	for _, e := range evs {
		if e.Type == protocol.MessageCompleted {
			break
		}
		if e.Type == protocol.MessageAppended {
			var d protocol.MessageAppendedData
			e.Decode(&d)
			if d.StepIndex != 0 || d.TurnID != "turn_0" {
				t.Fatalf("message.appended %+v", d)
			}
			streamed.WriteString(d.MessageDelta)
			appended++
		}
	}
	if appended < 2 || !strings.HasPrefix(res.Outcome.Reply, streamed.String()) || streamed.Len() == 0 {
		t.Fatalf("%d message.appended before message.completed, text %q of %q; events %s", appended, streamed.String(), res.Outcome.Reply, evetest.Join(evs))
	}
}
