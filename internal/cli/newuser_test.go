package cli

import (
	"os"
	"testing"

	"github.com/eve-temporal/eve/internal/config"
)

// EVE_METRICS_ADDR set but empty turns metrics off like --metrics-addr=
// does; unset, the default address (with its fallback) is used.
func TestMetricsAddrFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  *string
		want string
	}{
		{nil, config.DefaultMetricsAddr},
		{ptr(""), ""},
		{ptr("127.0.0.1:9999"), "127.0.0.1:9999"},
	} {
		t.Setenv("EVE_METRICS_ADDR", "")
		if c.env == nil {
			os.Unsetenv("EVE_METRICS_ADDR")
		} else {
			os.Setenv("EVE_METRICS_ADDR", *c.env)
		}
		for _, name := range []string{"worker", "dev"} {
			cmd, _, err := newRootCommand().Find([]string{name})
			if err != nil {
				t.Fatal(err)
			}
			if got := cmd.Flags().Lookup("metrics-addr").Value.String(); got != c.want {
				t.Errorf("%s with EVE_METRICS_ADDR %s: --metrics-addr %q, want %q", name, show(c.env), got, c.want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func show(v *string) string {
	if v == nil {
		return "unset"
	}
	return "=" + *v
}
