package tools_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/tools"
)

// Context.Agent numbers the sessions a call opens and each session's
// messages, which the runtime derives its ids from (a retried attempt
// repeating the same sends names the same children and deliveries).
func TestContextAgent(t *testing.T) {
	for _, c := range []struct {
		name    string
		run     func(ctx *tools.Context) error
		want    []string
		wantErr error
	}{
		{name: "two sessions, two messages to the first",
			run: func(ctx *tools.Context) error {
				a, b := ctx.Agent("reviewer"), ctx.Agent("writer")
				for _, s := range []*tools.AgentSession{a, b, a} {
					if _, err := s.Send("hi"); err != nil {
						return err
					}
				}
				return nil
			},
			want: []string{"reviewer 1/1", "writer 2/1", "reviewer 1/2"}},
		{name: "an empty message is refused", run: func(ctx *tools.Context) error {
			_, err := ctx.Agent("reviewer").Send("  ")
			return err
		}, wantErr: errors.New("send to agent reviewer: the message is empty")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := tools.NewContext(context.Background(), auth.Session{ID: "s"}, "turn_0", "call_1", "t", 1, nil)
			var got []string
			ctx.SetAgentSender(func(_ *tools.Context, name string, session, message int, _ string, _ tools.SendOptions) (tools.AgentResult, error) {
				got = append(got, fmt.Sprintf("%s %d/%d", name, session, message))
				return tools.AgentResult{Status: tools.AgentWaiting}, nil
			})
			err := c.run(ctx)
			if fmt.Sprint(err) != fmt.Sprint(c.wantErr) {
				t.Errorf("err %v, want %v", err, c.wantErr)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("sends (-want +got):\n%s", diff)
			}
		})
	}
	// Without a runtime sender (the tools API, a local call), nobody to
	// delegate to.
	ctx := tools.NewContext(context.Background(), auth.Session{ID: "s"}, "", "call_1", "t", 1, nil)
	if _, err := ctx.Agent("reviewer").Send("hi"); !errors.Is(err, tools.ErrCannotDelegate) {
		t.Errorf("err %v, want ErrCannotDelegate", err)
	}
}
