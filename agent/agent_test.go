package agent_test

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/payloadstore"
	"github.com/eve-temporal/eve/tools"
)

// Register takes what the app declares (Agent) and what the worker wires
// in (Host) apart, and refuses either when it cannot work, saying which
// field to set.
func TestRegister(t *testing.T) {
	store, err := payloadstore.Open(t.Context(), "file:"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := scripted.Parse([]byte("name: t\ndefault: hi\n"))
	if err != nil {
		t.Fatal(err)
	}
	newAgent := func() *agent.Agent {
		return &agent.Agent{Name: "t", Model: m, Tools: tools.NewRegistry(), LocalModel: true}
	}
	for _, c := range []struct {
		name    string
		edit    func(a *agent.Agent)
		host    agent.Host
		wantErr string // "" registers
	}{
		{name: "agent and host", host: agent.Host{Store: store}},
		{name: "completion URLs", host: agent.Host{Store: store, Actions: &agent.Actions{Secret: []byte("sixteen bytes or more"), PublicURL: "http://eve.test"}}},
		{name: "no store", host: agent.Host{}, wantErr: "set Host.Store"},
		{name: "no model", edit: func(a *agent.Agent) { a.Model = nil }, host: agent.Host{Store: store}, wantErr: "a model is required"},
		{name: "short action secret", host: agent.Host{Store: store, Actions: &agent.Actions{Secret: []byte("short"), PublicURL: "http://eve.test"}}, wantErr: "at least 16 random bytes"},
		{name: "action secret without URL", host: agent.Host{Store: store, Actions: &agent.Actions{Secret: []byte("sixteen bytes or more")}}, wantErr: "EVE_PUBLIC_URL"},
		{name: "compaction past the window", edit: func(a *agent.Agent) { a.CompactAt = 2 }, host: agent.Host{Store: store}, wantErr: "CompactAt"},
		{name: "disabling nothing", edit: func(a *agent.Agent) { a.Disable = []string{"nope"} }, host: agent.Host{Store: store}, wantErr: `disable "nope"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAgent()
			if c.edit != nil {
				c.edit(a)
			}
			var s testsuite.WorkflowTestSuite
			err := agent.Register(s.NewTestWorkflowEnvironment(), a, c.host)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("Register = %v, want nil", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("Register = %v, want an error saying %q", err, c.wantErr)
			}
		})
	}
}
