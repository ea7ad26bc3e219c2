// Package cluster proves eve's reference topology with real parts the test
// starts itself: a Temporal server (frontend, history with 4 shards,
// matching, worker) on PostgreSQL with SQL visibility, two eve workers, two
// API servers, and faults. The cluster test is behind the `cluster` build
// tag (`make test-cluster`); this file is not, so `make test` checks on every
// run that docker-compose.yml and the cluster test share one configuration.
package cluster

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/eve-temporal/eve/internal/visibility"
)

// The one configuration of docker-compose.yml and the cluster test.
const (
	// serverVersion is the Temporal server both run (Makefile's
	// TEMPORAL_SERVER_VERSION, the compose image tags).
	serverVersion = "v1.29.1"
	// numHistoryShards: the cluster test's server config and compose's
	// NUM_HISTORY_SHARDS.
	numHistoryShards = 4
	// dynamicConfigFile is the dynamic config both servers load.
	dynamicConfigFile = "deploy/temporal/dynamicconfig.yaml"
	// The scripts both run: schemas, then namespace and search attributes.
	setupPostgresScript   = "deploy/temporal/setup-postgres.sh"
	createNamespaceScript = "deploy/temporal/create-namespace.sh"
)

// Environment variables of eve's processes, by compose service. The cluster
// test sets exactly these (values of its own) on its workers and API servers.
var (
	sharedEnvKeys = []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "EVE_TASK_QUEUE", "EVE_ACTION_SECRET", "EVE_PUBLIC_URL", "EVE_PAYLOAD_STORE"}
	workerEnvKeys = append(slices.Clone(sharedEnvKeys), "EVE_METRICS_ADDR", "EVE_JOBS_DIR", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")
	apiEnvKeys    = append(slices.Clone(sharedEnvKeys), "EVE_ADDR", "EVE_API_KEY")
)

// envFor builds a process environment with exactly keys, from values (a
// key without a value is a bug in the test).
func envFor(t testing.TB, keys []string, values map[string]string) []string {
	t.Helper()
	env := []string{}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "EVE_") || strings.HasPrefix(name, "TEMPORAL_") || strings.HasPrefix(name, "AWS_") {
			continue // only what the topology says
		}
		env = append(env, kv)
	}
	for _, k := range keys {
		v, ok := values[k]
		if !ok {
			t.Fatalf("cluster test has no value for %s", k)
		}
		env = append(env, k+"="+v)
	}
	return env
}

// repoRoot is the repository's root directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not at %s: %v", dir, err)
	}
	return dir
}

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Entrypoint  []string          `yaml:"entrypoint"`
	} `yaml:"services"`
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestComposeMatchesCluster keeps docker-compose.yml and the cluster test on
// one configuration.
func TestComposeMatchesCluster(t *testing.T) {
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	svc := func(name string) (s struct {
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Entrypoint  []string          `yaml:"entrypoint"`
	}) {
		s, ok := cf.Services[name]
		if !ok {
			t.Fatalf("docker-compose.yml has no service %q", name)
		}
		return s
	}

	// The same environment variables on workers and API servers.
	if got, want := keysOf(svc("worker").Environment), sorted(workerEnvKeys); !slices.Equal(got, want) {
		t.Errorf("worker environment: compose has %v, the cluster test sets %v", got, want)
	}
	if got, want := keysOf(svc("api").Environment), sorted(apiEnvKeys); !slices.Equal(got, want) {
		t.Errorf("api environment: compose has %v, the cluster test sets %v", got, want)
	}

	// The same Temporal server, shards and dynamic config file.
	tmp := svc("temporal")
	if want := "temporalio/server:" + strings.TrimPrefix(serverVersion, "v"); tmp.Image != want {
		t.Errorf("temporal image %q, the cluster test runs %s", tmp.Image, want)
	}
	if got := tmp.Environment["NUM_HISTORY_SHARDS"]; got != "4" || numHistoryShards != 4 {
		t.Errorf("compose NUM_HISTORY_SHARDS %q, the cluster test runs %d shards", got, numHistoryShards)
	}
	dcPath := tmp.Environment["DYNAMIC_CONFIG_FILE_PATH"]
	mounted := false
	for _, v := range tmp.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if filepath.Clean(src) == "./"+dynamicConfigFile || filepath.Clean(src) == dynamicConfigFile {
			if strings.HasSuffix(dst, "/"+dcPath) {
				mounted = true
			}
		}
	}
	if !mounted {
		t.Errorf("compose's temporal service must load %s (DYNAMIC_CONFIG_FILE_PATH %q, volumes %v)", dynamicConfigFile, dcPath, tmp.Volumes)
	}
	for _, s := range []string{"temporal-schema", "temporal-namespace"} {
		if img := svc(s).Image; !strings.HasPrefix(img, "temporalio/admin-tools:"+strings.TrimPrefix(serverVersion, "v")+"-") {
			t.Errorf("%s image %q is not the admin tools of %s", s, img, serverVersion)
		}
	}

	// The same scripts: schemas, namespace and search attributes.
	if ep := strings.Join(svc("temporal-schema").Entrypoint, " "); !strings.HasSuffix(ep, "/"+filepath.Base(setupPostgresScript)) {
		t.Errorf("temporal-schema runs %q, the cluster test runs %s", ep, setupPostgresScript)
	}
	if ep := strings.Join(svc("temporal-namespace").Entrypoint, " "); !strings.HasSuffix(ep, "/"+filepath.Base(createNamespaceScript)) {
		t.Errorf("temporal-namespace runs %q, the cluster test runs %s", ep, createNamespaceScript)
	}

	// The search attributes the namespace script registers are eve's.
	script, err := os.ReadFile(filepath.Join(root, createNamespaceScript))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^for sa in (.+); do$`).FindSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no `for sa in ...; do` list of search attributes", createNamespaceScript)
	}
	got := map[string]string{}
	for _, f := range strings.Fields(string(m[1])) {
		name, typ, _ := strings.Cut(f, ":")
		got[name] = typ
	}
	if !mapsEqual(got, visibility.SearchAttributeTypes) {
		t.Errorf("%s registers %v, eve's are %v (visibility.SearchAttributeTypes)", createNamespaceScript, got, visibility.SearchAttributeTypes)
	}

	// The Makefile builds the same server version.
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^TEMPORAL_SERVER_VERSION := ` + regexp.QuoteMeta(serverVersion) + `$`).Match(mk) {
		t.Errorf("Makefile's TEMPORAL_SERVER_VERSION is not %s", serverVersion)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
