package providers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func clearEnv(t *testing.T) {
	for _, k := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", EnvModel} {
		t.Setenv(k, "")
	}
}

func TestFromSpec(t *testing.T) {
	clearEnv(t)
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(rules, []byte("name: demo\ndefault: hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-x")
	t.Setenv("OPENAI_API_KEY", "sk-x")
	for spec, id := range map[string]string{
		"anthropic:claude-sonnet-4-5": "anthropic:claude-sonnet-4-5",
		" Anthropic:claude-haiku-4-5": "anthropic:claude-haiku-4-5",
		"openai:gpt-4.1-mini":         "openai:gpt-4.1-mini",
		"openai:qwen3:8b":             "openai:qwen3:8b",
		"scripted:" + rules:           "scripted:demo",
	} {
		m, err := FromSpec(spec)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		if m.ID() != id {
			t.Errorf("%s: ID = %q, want %q", spec, m.ID(), id)
		}
	}
}

func TestFromSpecErrors(t *testing.T) {
	clearEnv(t)
	for spec, want := range map[string][]string{
		"":                                 {"want <provider>:<model>", "anthropic, openai, scripted"},
		"claude-sonnet-4-5":                {"want <provider>:<model>"},
		"gemini:gemini-2.5-pro":            {`unknown provider "gemini"`, "anthropic, openai, scripted"},
		"anthropic:":                       {"no model name"},
		"scripted:":                        {"no rules file"},
		"anthropic:claude-x":               {"ANTHROPIC_API_KEY"},
		"openai:gpt-4.1-mini":              {"OPENAI_API_KEY"},
		"scripted:/nonexistent/rules.yaml": {"rules"},
	} {
		m, err := FromSpec(spec)
		if err == nil {
			t.Errorf("%q: no error (model %v)", spec, m)
			continue
		}
		if m != nil {
			t.Errorf("%q: a model with the error", spec)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q lacks %q", spec, err, w)
			}
		}
	}
}

func TestOpenAICompatibleServerNeedsNoKey(t *testing.T) {
	clearEnv(t)
	t.Setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
	m, err := FromSpec("openai:llama3.2")
	if err != nil || m.ID() != "openai:llama3.2" {
		t.Fatalf("m = %v, err = %v", m, err)
	}
}

func TestFromEnv(t *testing.T) {
	clearEnv(t)
	if m, err := FromEnv(); m != nil || err != nil {
		t.Errorf("unset: %v, %v", m, err)
	}
	t.Setenv(EnvModel, "nope:x")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "EVE_MODEL") {
		t.Errorf("bad: %v", err)
	}
	t.Setenv(EnvModel, "anthropic:claude-sonnet-4-5")
	t.Setenv("ANTHROPIC_API_KEY", "k")
	if m, err := FromEnv(); err != nil || m.ID() != "anthropic:claude-sonnet-4-5" {
		t.Errorf("set: %v, %v", m, err)
	}
}
