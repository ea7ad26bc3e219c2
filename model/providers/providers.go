// Package providers chooses a model from a spec such as EVE_MODEL's:
//
//	anthropic:<model>   Anthropic Messages API (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL)
//	openai:<model>      OpenAI Chat Completions or a compatible server (OPENAI_API_KEY, OPENAI_BASE_URL)
//	scripted:<file>     the deterministic scripted model, rules from a YAML or JSON file
package providers

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/model/anthropic"
	"github.com/eve-temporal/eve/model/openai"
	"github.com/eve-temporal/eve/model/scripted"
)

// EnvModel names the environment variable FromEnv reads.
const EnvModel = "EVE_MODEL"

var builders = map[string]func(rest string) (model.Model, error){
	"anthropic": func(name string) (model.Model, error) {
		return anthropic.New(anthropic.Options{Model: name})
	},
	"openai": func(name string) (model.Model, error) {
		return openai.New(openai.Options{Model: name})
	},
	"scripted": func(path string) (model.Model, error) {
		return scripted.Load(path)
	},
}

// Prefixes lists the providers FromSpec knows, sorted.
func Prefixes() []string {
	out := make([]string, 0, len(builders))
	for p := range builders {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// FromSpec builds the model a spec names: "<provider>:<model>" (see the
// package comment). Keys and base URLs come from each provider's
// environment variables; a missing key is an error that names the
// variable to set. It makes no request.
func FromSpec(spec string) (model.Model, error) {
	spec = strings.TrimSpace(spec)
	prefix, rest, ok := strings.Cut(spec, ":")
	if !ok || prefix == "" {
		return nil, fmt.Errorf("model spec %q: want <provider>:<model>, with provider one of %s (e.g. anthropic:claude-sonnet-4-5, openai:gpt-4.1-mini, scripted:rules.yaml)",
			spec, strings.Join(Prefixes(), ", "))
	}
	prefix = strings.ToLower(prefix)
	build, ok := builders[prefix]
	if !ok {
		return nil, fmt.Errorf("model spec %q: unknown provider %q; use one of %s", spec, prefix, strings.Join(Prefixes(), ", "))
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		what := "model name"
		if prefix == "scripted" {
			what = "rules file"
		}
		return nil, fmt.Errorf("model spec %q: no %s after %q", spec, what, prefix+":")
	}
	m, err := build(rest)
	if err != nil {
		return nil, fmt.Errorf("model spec %q: %w", spec, err)
	}
	return m, nil
}

// FromEnv builds the model EVE_MODEL names, or returns nil, nil when it is
// unset so the caller can fall back to its default.
func FromEnv() (model.Model, error) {
	spec := strings.TrimSpace(os.Getenv(EnvModel))
	if spec == "" {
		return nil, nil
	}
	m, err := FromSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvModel, err)
	}
	return m, nil
}
