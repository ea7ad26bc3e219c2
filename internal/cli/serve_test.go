package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/eve-temporal/eve/internal/api"
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
