package main

import (
	"go.temporal.io/sdk/worker"

	"github.com/eve-temporal/eve/internal/devserver"
)

// sweepScenarios are the rows -sweep measures for every sweep config.
var sweepScenarios = []string{"raw-turn/regular", "raw-turn/eager", "raw-turn/local", "raw-park/regular", "raw-turn/regular+eager-start"}

func dc(kv ...string) []string {
	var args []string
	for _, s := range kv {
		args = append(args, "--dynamic-config-value", s)
	}
	return args
}

// sweepConfigs are the server and worker settings compared in
// docs/performance.md. Each entry changes one thing from its neighbor.
func sweepConfigs() []serverConfig {
	const (
		pollRPS    = "history.transferProcessorMaxPollRPS=200"
		timerRPS   = "history.timerProcessorMaxPollRPS=200"
		readParts  = "matching.numTaskqueueReadPartitions=1"
		writeParts = "matching.numTaskqueueWritePartitions=1"
		eager      = "system.enableActivityEagerExecution=true"
	)
	tuned := []string{pollRPS, timerRPS, readParts, writeParts}
	with := func(base []string, more ...string) []string {
		return dc(append(append([]string(nil), base...), more...)...)
	}
	pollers := func(n int) worker.Options {
		return worker.Options{MaxConcurrentWorkflowTaskPollers: n, MaxConcurrentActivityTaskPollers: n}
	}
	return []serverConfig{
		{name: "sw-default", desc: "dev server defaults"},
		{name: "sw-eager", extraArgs: dc(eager), desc: "defaults + eager activities"},
		{name: "sw-pollrps", extraArgs: dc(pollRPS), desc: "defaults + transfer pollRPS=200"},
		{name: "sw-partitions", extraArgs: dc(readParts, writeParts), desc: "defaults + 1 task queue partition"},
		{name: "sw-tuned", extraArgs: with(tuned), desc: "design.md's tuned set: pollRPS=200, timerRPS=200, 1 partition"},
		{name: "sw-fast", tuning: devserver.TuningFast, desc: "tuned + eager activities (= devserver.TuningFast)"},
		{name: "sw-fast-rps1000", tuning: devserver.TuningFast, extraArgs: dc("history.transferProcessorMaxPollRPS=1000", "history.timerProcessorMaxPollRPS=1000"), desc: "fast, transfer/timer pollRPS=1000"},
		{name: "sw-fast-misc", tuning: devserver.TuningFast, extraArgs: dc(
			`history.transferProcessorUpdateAckInterval="1s"`, `history.timerProcessorUpdateAckInterval="1s"`,
			`matching.longPollExpirationInterval="10s"`), desc: "fast + ack intervals 1 s + longPollExpiration 10 s"},
		{name: "sw-fast-nosacache", tuning: devserver.TuningFast, extraArgs: dc("system.forceSearchAttributesCacheRefreshOnRead=false"), desc: "fast + search-attribute cache on (the CLI turns it off)"},
		{name: "sw-fast-pollers8", tuning: devserver.TuningFast, workerOptions: pollers(8), desc: "fast + 8 workflow/activity task pollers"},
		{name: "sw-fast-autoscale", tuning: devserver.TuningFast, workerOptions: worker.Options{
			WorkflowTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
			ActivityTaskPollerBehavior: worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{}),
		}, desc: "fast + autoscaling pollers"},
		{name: "sw-default-sqlite", sqlite: true, desc: "defaults, SQLite file (rollback journal, synchronous=full)"},
		{name: "sw-tuned-eager-sqlite", sqlite: true, extraArgs: with(tuned, eager), desc: "fast's dynamic config, SQLite file without pragmas"},
		{name: "sw-fast-sqlite", sqlite: true, tuning: devserver.TuningFast, desc: "devserver.TuningFast, SQLite file (WAL, synchronous=normal)"},
	}
}
