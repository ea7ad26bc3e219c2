// Command clusteragent is the app the cluster test (test/cluster) runs as
// its workers and API servers: eve's demo agent, built on the public entry
// point eve.Main like any app, plus one tool made for killing a worker
// mid-call: slow_step, which is Idempotent, heartbeats, runs a few seconds
// and leaves marker files saying which worker started and finished it.
//
//	clusteragent worker ...   # as cmd/worker
//	clusteragent serve ...    # as `eve serve`
//	clusteragent doctor ...   # as `eve doctor`
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/eve-temporal/eve"
	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

// Environment of slow_step.
const (
	// MarkersEnv names the directory slow_step writes its marker files to
	// (none written when unset).
	MarkersEnv = "EVE_CLUSTER_MARKERS"
	// WorkerNameEnv names this worker in markers and results (default
	// hostname/pid).
	WorkerNameEnv = "EVE_CLUSTER_WORKER"
)

// How long slow_step runs, and how often it heartbeats.
const (
	slowRun       = 4 * time.Second
	slowHeartbeat = 250 * time.Millisecond
)

// SlowInput is slow_step's input.
type SlowInput struct {
	Tag string `json:"tag" jsonschema:"a word naming this call in marker files"`
}

// SlowResult is slow_step's output (and the content of its markers).
type SlowResult struct {
	Tag     string `json:"tag"`
	Worker  string `json:"worker"`
	Pid     int    `json:"pid"`
	Attempt int32  `json:"attempt"`
	Phase   string `json:"phase"` // "start" or "done"
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func workerName() string {
	if n := os.Getenv(WorkerNameEnv); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// mark writes <dir>/<tag>.<attempt>.<phase>.json atomically.
func mark(r SlowResult) error {
	dir := os.Getenv(MarkersEnv)
	if dir == "" {
		return nil
	}
	b, _ := json.Marshal(r)
	name := filepath.Join(dir, fmt.Sprintf("%s.%d.%s.json", r.Tag, r.Attempt, r.Phase))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// SlowStep is slow_step: safe to run again, so an attempt lost with its
// worker runs again on another one once its heartbeat stops.
func SlowStep() *tools.Tool {
	t := tools.Func("slow_step", "Run a slow, idempotent step (a few seconds, heartbeating) and say which worker finished it.",
		func(ctx *tools.Context, in SlowInput) (SlowResult, error) {
			if !tagRE.MatchString(in.Tag) {
				return SlowResult{}, tools.NonRetryable(fmt.Errorf("tag %q: want 1-64 letters, digits, _ or -", in.Tag))
			}
			r := SlowResult{Tag: in.Tag, Worker: workerName(), Pid: os.Getpid(), Attempt: ctx.Attempt, Phase: "start"}
			if err := mark(r); err != nil {
				return SlowResult{}, err
			}
			end := time.Now().Add(slowRun)
			tick := time.NewTicker(slowHeartbeat)
			defer tick.Stop()
			for time.Now().Before(end) {
				ctx.Heartbeat(r.Worker)
				select {
				case <-ctx.Done():
					return SlowResult{}, ctx.Err()
				case <-tick.C:
				}
			}
			r.Phase = "done"
			if err := mark(r); err != nil {
				return SlowResult{}, err
			}
			return r, nil
		})
	t.Idempotent = true
	t.HeartbeatTimeout = 2 * time.Second
	t.Timeout = time.Minute
	return t
}

// slowRule is the scripted model's rule for slow_step, after the demo's own.
var slowRule = scripted.Rule{
	Match: `^slow step (?P<tag>[\w-]+)`,
	Steps: []scripted.Step{
		{Calls: []scripted.Call{{Tool: "slow_step", Input: map[string]any{"tag": "{{tag}}"}}}},
		{Reply: "slow step {{tag}} finished by {{result.slow_step.worker}} on attempt {{result.slow_step.attempt}}{{result.slow_step.error}}"},
	},
}

// Agent is the demo agent with slow_step and its rule.
func Agent() (*agent.Agent, error) {
	ag, err := demo.Agent()
	if err != nil {
		return nil, err
	}
	if err := ag.Tools.Register(SlowStep()); err != nil {
		return nil, err
	}
	var s scripted.Script
	if err := yaml.Unmarshal(demo.Rules(), &s); err != nil {
		return nil, fmt.Errorf("demo rules: %w", err)
	}
	s.Name = "cluster"
	s.Rules = append(s.Rules, slowRule)
	m, err := scripted.New(s)
	if err != nil {
		return nil, err
	}
	ag.Model = m
	return ag, nil
}

func main() { eve.Main(Agent) }
