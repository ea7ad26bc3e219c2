package main

import (
	"strings"
	"testing"
)

func TestScenariosWellFormed(t *testing.T) {
	names := map[string]bool{}
	for _, s := range scenarios {
		if s.name == "" || s.setup == nil || !(s.latency || s.throughput) {
			t.Errorf("scenario %+v: needs a name, a setup and something to measure", s.name)
		}
		if names[s.name] {
			t.Errorf("scenario %q listed twice", s.name)
		}
		names[s.name] = true
	}
	configs := map[string]bool{}
	for _, c := range allConfigs() {
		if configs[c.name] {
			t.Errorf("config %q listed twice", c.name)
		}
		configs[c.name] = true
	}
	for _, s := range scenarios {
		if s.baseline != "" {
			scen, cfg, _ := strings.Cut(s.baseline, "@")
			if !names[scen] || (cfg != "" && !configs[cfg]) {
				t.Errorf("scenario %q: unknown baseline %q", s.name, s.baseline)
			}
		}
		for _, c := range s.configs {
			if !configs[c] {
				t.Errorf("scenario %q: unknown config %q", s.name, c)
			}
		}
	}
	for _, n := range sweepScenarios {
		if !names[n] {
			t.Errorf("sweep scenario %q does not exist", n)
		}
	}
}

func TestPickScenarios(t *testing.T) {
	def := pickScenarios(flags{})
	for _, s := range def {
		if s.extra {
			t.Errorf("extra scenario %q selected by default", s.name)
		}
	}
	if len(def) == 0 {
		t.Fatal("no default scenarios")
	}
	if _, err := pickConfigs(flags{configs: "fast,nope"}); err == nil {
		t.Error("unknown config accepted")
	}
}
