package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

func okTool(name string) *Tool {
	return &Tool{Name: name, Description: "Do it.", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), Execute: noop}
}

func TestNamesUniqueCaseInsensitively(t *testing.T) {
	r := NewRegistry()
	r.MustRegister(okTool("getWeather"))
	err := r.Register(okTool("getweather"))
	if err == nil || !strings.Contains(err.Error(), `differs only in case from tool "getWeather"`) {
		t.Fatalf("err = %v", err)
	}
	if err := NewRegistry().Register(okTool("a"), okTool("A")); err == nil {
		t.Fatal("a and A registered together")
	}
}
