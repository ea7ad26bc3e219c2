package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/internal/api"
	"github.com/eve-temporal/eve/internal/toolsapi"
)

// eve serve (and eve dev) refuse to start open on a non-loopback address
// before dialing anything, and say how to fix it; --insecure-open or a key
// lets them past that check.
func TestServeRefusesOpenBeyondLoopback(t *testing.T) {
	for _, v := range []string{"EVE_API_KEY", "EVE_API_KEYS_FILE", "EVE_INSECURE_OPEN", "EVE_ADDR"} {
		t.Setenv(v, "")
	}
	// Nothing listens on port 1: were the check skipped, Dial would fail instead.
	for _, cmdName := range []string{"serve", "dev"} {
		root := newRootCommand()
		root.SetArgs([]string{cmdName, "--addr", "0.0.0.0:4111", "--address", "127.0.0.1:1"})
		err := root.ExecuteContext(context.Background())
		if !errors.Is(err, api.ErrInsecureOpen) {
			t.Fatalf("eve %s open on 0.0.0.0: %v", cmdName, err)
		}
		for _, want := range []string{"EVE_API_KEY", "EVE_API_KEYS_FILE", "--insecure-open", "EVE_INSECURE_OPEN=1"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("eve %s: error %q should mention %s", cmdName, err, want)
			}
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"--insecure-open"}, nil},
		{nil, map[string]string{"EVE_INSECURE_OPEN": "1"}},
		{[]string{"--eve-api-key", "sk_test"}, nil},
		{[]string{"--addr", "127.0.0.1:4111"}, nil},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var af apiFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		af.Bind(fs)
		if err := fs.Parse(append([]string{"--addr", "0.0.0.0:4111"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if _, err := af.checkOpen(); err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		for k := range c.env {
			t.Setenv(k, "")
		}
	}
}

// The serve and dev commands' flags bind onto the handler's one
// declaration of its settings (api.ServerOptions, eve.ServerOptions):
// each flag lands in its field, and the environment gives the defaults.
func TestServeFlagsBindServerOptions(t *testing.T) {
	for _, v := range []string{"EVE_ADDR", "EVE_API_KEY", "EVE_API_KEYS_FILE", "EVE_STREAM_LEASE", "EVE_STREAM_HEARTBEAT", "EVE_STREAM_POLL",
		"EVE_MAX_BODY_BYTES", "EVE_CORS_ORIGINS", "EVE_INSECURE_OPEN", "EVE_MAX_STREAMS_PER_PRINCIPAL", "EVE_MAX_TOOL_CALLS", "EVE_NOTIFY",
		"EVE_TEMPORAL_UI_URL", "EVE_AGENT_NAME", "EVE_ACTION_SECRET", "EVE_PUBLIC_URL"} {
		t.Setenv(v, "")
	}
	for _, c := range []struct {
		name        string
		args        []string
		env         map[string]string
		want        api.ServerOptions
		wantOrigins []string
	}{
		{
			name: "defaults",
			want: api.ServerOptions{Addr: "127.0.0.1:4111", LeaseDuration: api.DefaultLeaseDuration, HeartbeatInterval: api.DefaultHeartbeatInterval,
				PollInterval: api.DefaultPollInterval, MaxBodyBytes: api.DefaultMaxBodyBytes, MaxStreamsPerPrincipal: api.DefaultMaxStreamsPerPrincipal,
				MaxToolCalls: toolsapi.DefaultMaxToolCalls},
		},
		{
			name: "flags",
			args: []string{"--addr", "0.0.0.0:9000", "--eve-api-key", "sk_1", "--keys-file", "keys.yaml", "--stream-lease", "5s",
				"--stream-heartbeat", "2s", "--stream-poll", "20ms", "--max-body-bytes", "2048", "--cors-origins", "https://a.example, https://b.example",
				"--insecure-open", "--max-streams-per-principal", "7", "--max-tool-calls", "3", "--notify", "postgres://db/eve",
				"--temporal-ui-url", "http://ui:8233", "--agent-name", "Shop"},
			want: api.ServerOptions{Addr: "0.0.0.0:9000", APIKey: "sk_1", KeysFile: "keys.yaml", LeaseDuration: 5 * time.Second,
				HeartbeatInterval: 2 * time.Second, PollInterval: 20 * time.Millisecond, MaxBodyBytes: 2048, InsecureOpen: true,
				MaxStreamsPerPrincipal: 7, MaxToolCalls: 3, Notify: "postgres://db/eve", TemporalUIURL: "http://ui:8233", AgentName: "Shop"},
			wantOrigins: []string{"https://a.example", "https://b.example"},
		},
		{
			name: "environment",
			env: map[string]string{"EVE_ADDR": "127.0.0.1:5000", "EVE_API_KEY": "sk_env", "EVE_STREAM_LEASE": "9s", "EVE_INSECURE_OPEN": "1",
				"EVE_MAX_TOOL_CALLS": "-1", "EVE_NOTIFY": "postgres://env/eve", "EVE_AGENT_NAME": "Env"},
			want: api.ServerOptions{Addr: "127.0.0.1:5000", APIKey: "sk_env", LeaseDuration: 9 * time.Second, HeartbeatInterval: api.DefaultHeartbeatInterval,
				PollInterval: api.DefaultPollInterval, MaxBodyBytes: api.DefaultMaxBodyBytes, InsecureOpen: true,
				MaxStreamsPerPrincipal: api.DefaultMaxStreamsPerPrincipal, MaxToolCalls: -1, Notify: "postgres://env/eve", AgentName: "Env"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var af apiFlags
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			af.Bind(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, af.ServerOptions, cmpopts.IgnoreFields(api.ServerOptions{}, "Logger", "AuthorizeSession")); diff != "" {
				t.Errorf("ServerOptions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantOrigins, af.origins()); diff != "" {
				t.Errorf("CORSOrigins (-want +got):\n%s", diff)
			}
		})
	}
}
