package toolsapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/auth"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/catalog/catalogtest"
	"github.com/eve-temporal/eve/demo"
	"github.com/eve-temporal/eve/internal/toolcatalog"
	"github.com/eve-temporal/eve/internal/work"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func demoService(t testing.TB, mut func(*Options)) *Service {
	t.Helper()
	a, err := demo.Agent()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Agent: a, Logger: quiet()}
	if mut != nil {
		mut(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCatalogFromAgent(t *testing.T) {
	extra := tools.Func("echo", "Echo the input back.", func(ctx *tools.Context, in struct {
		Text string `json:"text"`
	}) (map[string]string, error) {
		return map[string]string{"text": in.Text}, nil
	})
	extra.Capability, extra.Version, extra.Annotations.ReadOnly = "text.echo", "2.1.0", true
	s := demoService(t, func(o *Options) { o.Tools = []*tools.Tool{extra} })
	if s.Toolkit() != "demo" {
		t.Fatalf("toolkit = %q", s.Toolkit())
	}
	var names []string
	for _, d := range s.Catalog().Definitions() {
		names = append(names, d.Name)
	}
	want := []string{"demo.ask_question", "demo.choose_plan", "demo.deploy", "demo.echo", "demo.get_weather", "demo.issue_credit", "demo.pick_addons", "demo.provision", "demo.publish_notes", "demo.refund_charge", "demo.research", "demo.run_report", "demo.transfer_funds"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %v", names)
	}
	e, _ := s.Catalog().Lookup("demo.echo")
	if e.Capability != "text.echo" || e.Version != "2.1.0" || !e.Annotations.ReadOnly || e.Toolkit != "demo" {
		t.Fatalf("echo = %+v", e)
	}
	w, _ := s.Catalog().Lookup("demo.get_weather")
	if w.Capability != "demo" || w.Version != catalog.DefaultVersion || w.Annotations.ReadOnly {
		t.Fatalf("get_weather = %+v", w)
	}
	r, _ := s.Catalog().Lookup("demo.run_report")
	if !r.Annotations.Async || !r.Annotations.OpenWorld || len(r.OutputSchema) == 0 {
		t.Fatalf("run_report = %+v", r)
	}
	if tl, ok := s.Tool("demo.get_weather"); !ok || tl.Name != "get_weather" {
		t.Fatal("Tool lookup")
	}
}

// The catalog of an agent lists exactly the tools its turns get
// (agent.Tools: its own minus the disabled, plus the built-ins it keeps),
// each under its own toolkit when it names one.
func TestCatalogIsTheAgentsRegistry(t *testing.T) {
	own := tools.Func("lookup_order", "Look up an order by id.", func(ctx *tools.Context, in struct {
		ID string `json:"id"`
	}) (map[string]string, error) {
		return map[string]string{"id": in.ID}, nil
	})
	own.Toolkit, own.Capability = "orders", "orders.read"
	for _, disable := range [][]string{nil, {"ask_question"}, {"get_weather"}, {"get_weather", "ask_question"}} {
		reg := tools.NewRegistry()
		reg.MustRegister(demo.GetWeather(), demo.RefundCharge(), own)
		a := &agent.Agent{Name: "Shop", Tools: reg, Disable: disable}
		turns, err := agent.Tools(a)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(Options{Agent: a, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		var want, got []string
		for _, tl := range turns.List() {
			want = append(want, toolcatalog.Definition(tl, "shop").Name)
		}
		slices.Sort(want)
		for _, d := range s.Catalog().Definitions() {
			got = append(got, d.Name)
			// The same tool (built-ins are made afresh for each registry).
			if tl, ok := s.Tool(d.Name); !ok || !reflect.DeepEqual(toolcatalog.Definition(tl, "shop"), toolcatalog.Definition(mustGet(t, turns, tl.Name), "shop")) ||
				(tl.Name != "ask_question" && tl != mustGet(t, turns, tl.Name)) {
				t.Fatalf("%s: not backed by the agent's tool", d.Name)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("disable %v: catalog %v, turns %v", disable, got, want)
		}
		if slices.Contains(disable, "ask_question") == slices.Contains(got, "shop.ask_question") {
			t.Fatalf("disable %v: built-in in catalog = %v", disable, slices.Contains(got, "shop.ask_question"))
		}
		if d, ok := s.Catalog().Lookup("orders.lookup_order"); !ok || d.Capability != "orders.read" {
			t.Fatalf("own toolkit: %+v", d)
		}
	}
}

func mustGet(t *testing.T, r *tools.Registry, name string) *tools.Tool {
	t.Helper()
	tl, ok := r.Get(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	return tl
}

// A tool the catalog would refuse is refused when the agent is assembled,
// naming the tool and the rule, rather than left out of the tools API with
// a log line.
func TestCatalogRulesAtRegistration(t *testing.T) {
	bad := tools.Func("_hidden", "A tool whose name is no catalog slug.", func(ctx *tools.Context, in struct{}) (struct{}, error) { return struct{}{}, nil })
	reg := tools.NewRegistry()
	reg.MustRegister(bad, demo.GetWeather())
	_, err := agent.Tools(&agent.Agent{Name: "demo", Tools: reg})
	if err == nil || !strings.Contains(err.Error(), `"_hidden"`) || !strings.Contains(err.Error(), string(catalog.RuleNameFormat)) {
		t.Fatalf("err = %v", err)
	}
	// Through the service: an extra tool that breaks a rule fails New.
	odd := tools.Func("odd", "Odd version.", func(ctx *tools.Context, in struct{}) (struct{}, error) { return struct{}{}, nil })
	odd.Version = "v1"
	if _, err := New(Options{Tools: []*tools.Tool{odd}, Logger: quiet()}); err == nil || !strings.Contains(err.Error(), string(catalog.RuleVersion)) {
		t.Fatalf("New: %v", err)
	}
	// A toolkit slug that is not one is an error too.
	if _, err := New(Options{Toolkit: "Not A Slug", Logger: quiet()}); err == nil {
		t.Fatal("bad toolkit accepted")
	}
}

// The tools API runs a tool with the plan a turn's model step records for
// the same tool and input (activities.PlanCall), under the execution's call id.
func TestExecutionPlanIsTheTurnPlan(t *testing.T) {
	s := demoService(t, nil)
	cases := []struct{ name, in string }{
		{"demo.get_weather", `{"city":"Paris"}`},
		{"demo.get_weather", `{"city":""}`}, // invalid: the plan says so
		{"demo.refund_charge", `{"chargeId":"ch_1","amount":5}`},
		{"demo.issue_credit", `{"tenantId":"t1","amount":10}`},
		{"demo.run_report", `{"name":"sales"}`},
		{"demo.choose_plan", `{"accountId":"a1"}`},
		{"demo.pick_addons", `{}`},
		{"demo.ask_question", `{"question":"which?","options":["a","b"]}`},
	}
	for _, c := range cases {
		name, in := c.name, c.in
		tl, ok := s.Tool(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		call := model.ToolCall{ID: signals.ExecutionCallID, Name: tl.Name, Input: json.RawMessage(in)}
		turn := work.PlanCall(tl, call)
		if got := plan(tl, json.RawMessage(in)); !reflect.DeepEqual(got, turn) {
			t.Fatalf("%s: execution plan %+v, turn plan %+v", name, got, turn)
		}
		if !turn.Known || turn.Title == "" {
			t.Fatalf("%s: plan %+v", name, turn)
		}
	}
}

func TestToolkitSlug(t *testing.T) {
	for in, want := range map[string]string{"demo": "demo", "": "tools", "Support Bot 2": "support_bot_2", "42": "tools", "9lives": "lives", strings.Repeat("a", 40): strings.Repeat("a", 32)} {
		if got := ToolkitSlug(in); got != want || !catalog.ToolkitPattern.MatchString(got) {
			t.Errorf("ToolkitSlug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExecutionIDStable(t *testing.T) {
	a := ExecutionID("eve", "u1", "demo.get_weather", "k1")
	if a != ExecutionID("eve", "u1", "demo.get_weather", "k1") || !strings.HasPrefix(a, ExecutionIDPrefix) {
		t.Fatal(a)
	}
	// A user's id is the one it had before principal types counted.
	for _, typ := range []string{auth.TypeUser, ""} {
		if b := OwnerExecutionID("eve", auth.Principal{ID: "u1", Type: typ}, "demo.get_weather", "k1"); b != a {
			t.Fatalf("type %q: %s, want %s", typ, b, a)
		}
	}
	for _, b := range []string{ExecutionID("eve", "u2", "demo.get_weather", "k1"), ExecutionID("eve", "u1", "demo.other", "k1"), ExecutionID("eve", "u1", "demo.get_weather", "k2"),
		ExecutionID("eve", "u1\x00demo.get_weather", "", "k1"), ExecutionID("staging", "u1", "demo.get_weather", "k1"),
		OwnerExecutionID("eve", auth.Principal{ID: "u1", Type: auth.TypeService}, "demo.get_weather", "k1")} {
		if a == b {
			t.Fatalf("collision %s", a)
		}
	}
}

// call serves one request through the handler.
func call(t testing.TB, h http.Handler, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body.String())
		}
	}
	return rec.Code
}

func TestHTTPGetAndSearch(t *testing.T) {
	s := demoService(t, nil)
	h := s.Handler()
	for _, f := range catalog.Formats {
		var got map[string]any
		if code := call(t, h, "GET", "/v1/tools?format="+string(f), nil, &got); code != 200 {
			t.Fatalf("%s: %d %v", f, code, got)
		}
		res, _ := s.Get(catalog.GetToolsOptions{Format: f})
		b, _ := json.Marshal(res)
		var want map[string]any
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: fast encoding differs:\n got %v\nwant %v", f, got, want)
		}
	}
	var res struct {
		Tools   []catalog.AnthropicTool `json:"tools"`
		NameMap catalog.ToolNameMap     `json:"nameMap"`
	}
	call(t, h, "GET", "/v1/tools?format=anthropic&toolkits=demo", nil, &res)
	if len(res.Tools) != 12 || res.NameMap.WireToCanonical["demo_get_weather"] != "demo.get_weather" {
		t.Fatalf("anthropic: %+v", res)
	}
	var e Error
	if code := call(t, h, "GET", "/v1/tools?toolkits=nope", nil, &e); code != 400 || e.Code != "unknown_toolkit" || e.OK {
		t.Fatalf("unknown toolkit: %d %+v", code, e)
	}
	if code := call(t, h, "GET", "/v1/tools?strict=maybe", nil, &e); code != 400 {
		t.Fatalf("bad bool: %d", code)
	}
	var sr catalog.SearchToolsResult
	if code := call(t, h, "POST", "/v1/tools/search", catalog.SearchToolsOptions{Query: "weather in a city", Limit: 2}, &sr); code != 200 || len(sr.Tools) == 0 || sr.Tools[0].Name != "demo.get_weather" {
		t.Fatalf("search: %d %+v", code, sr)
	}
	var tr ToolResponse
	if code := call(t, h, "GET", "/v1/tools/demo.choose_plan", nil, &tr); code != 200 || tr.Executable || !strings.Contains(tr.Reason, "client tool") || tr.Wire != "demo_choose_plan" {
		t.Fatalf("tool: %d %+v", code, tr)
	}
	if code := call(t, h, "GET", "/v1/nope", nil, &e); code != 404 || e.Code != "not_found" {
		t.Fatalf("route: %d %+v", code, e)
	}
}

func TestHTTPExecuteRefusals(t *testing.T) {
	s := demoService(t, nil)
	h := s.Handler()
	for _, c := range []struct {
		tool   string
		input  string
		status int
		code   string
	}{
		{"demo.nope", `{}`, 404, catalog.CodeUnknownTool},
		{"demo.get_weather", `{"city":""}`, 400, catalog.CodeInvalidInput},
		{"demo.get_weather", `{"town":"Paris"}`, 400, catalog.CodeInvalidInput},
		{"demo.choose_plan", `{"accountId":"a"}`, 400, "not_executable"},
		{"demo.refund_charge", `{"chargeId":"c","amount":1}`, 403, "approval_required"},
		{"demo.get_weather", `{"city":"Paris"}`, 503, "unavailable"}, // no Temporal client
	} {
		var e Error
		code := call(t, h, "POST", "/v1/tools/"+c.tool+"/execute", map[string]any{"input": json.RawMessage(c.input)}, &e)
		if code != c.status || e.Message == "" || e.Code != c.code || e.OK {
			t.Errorf("%s %s: %d %+v", c.tool, c.input, code, e)
			continue
		}
		if c.code == catalog.CodeInvalidInput && (len(e.Violations) == 0 || e.Tool != c.tool) {
			t.Errorf("%s: violations missing: %+v", c.input, e)
		}
	}
	var e Error
	if code := call(t, h, "POST", "/v1/tools/demo.get_weather/execute", map[string]any{"input": map[string]any{"city": "x"}, "mode": "later"}, &e); code != 503 {
		// Mode is checked after the client: no client answers 503 first.
		t.Logf("mode check: %d %+v", code, e)
	}
	if code := call(t, h, "POST", "/v1/tools/execute-tool-calls", map[string]any{"provider": "anthropic", "calls": []any{}}, &e); code != 400 || !strings.Contains(e.Message, "nameMap") {
		t.Fatalf("tool calls without name map: %d %+v", code, e)
	}
	if code := call(t, h, "GET", "/v1/executions/session-abc", nil, &e); code != 404 || e.Code != "execution_not_found" {
		t.Fatalf("foreign id: %d %+v", code, e)
	}
	req := httptest.NewRequest("POST", "/v1/tools/search", strings.NewReader("{"))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"ok":false`) || !strings.Contains(rec.Body.String(), "invalid_json") {
		t.Fatalf("bad json: %d %s", rec.Code, rec.Body.String())
	}
}

// Tool calls whose execution is refused come back as error results, with
// the refusal's code; unmapped names are never executed.
func TestToolCallsRefusedInModelResults(t *testing.T) {
	s := demoService(t, nil)
	nm := s.Catalog().NameMap()
	blocks := s.ExecuteAnthropicToolCalls(context.Background(), []catalog.AnthropicToolCall{
		{Type: "tool_use", ID: "a", Name: "demo_get_weather", Input: json.RawMessage(`{"town":"x"}`)},
		{Type: "tool_use", ID: "b", Name: "demo.get_weather", Input: json.RawMessage(`{}`)},
		{Type: "tool_use", ID: "c", Name: "demo_choose_plan", Input: json.RawMessage(`{"accountId":"x"}`)},
	}, catalog.ExecuteToolCallsOptions{NameMap: nm})
	for i, want := range []string{"invalid_input", "unknown_tool", "not_executable"} {
		if !blocks[i].IsError || !strings.Contains(blocks[i].Content, want) {
			t.Errorf("block %d = %+v, want %s", i, blocks[i], want)
		}
	}
}

func TestOwner(t *testing.T) {
	var p *auth.Principal
	f := func(requested string) (auth.Principal, error) { return Owner(p, requested, DefaultUserID) }
	user := func(id string) auth.Principal { return auth.Principal{ID: id, Type: auth.TypeUser} }
	p = &auth.Principal{ID: "alice", Type: "user"}
	if u, err := f(""); !reflect.DeepEqual(u, user("alice")) || err != nil {
		t.Fatal(u, err)
	}
	if _, err := f("bob"); !errors.Is(err, ErrForbidden) {
		t.Fatal(err)
	}
	if u, err := f("alice"); !reflect.DeepEqual(u, user("alice")) || err != nil {
		t.Fatal(u, err)
	}
	// A service acts for users only when its keys-file grant says so, and
	// as itself it keeps its type.
	p = &auth.Principal{ID: "api-key", Type: "service"}
	if _, err := f("bob"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("service without a grant acting for bob: %v", err)
	}
	if u, _ := f(""); !reflect.DeepEqual(u, (auth.Principal{ID: "api-key", Type: auth.TypeService})) {
		t.Fatal(u)
	}
	p = &auth.Principal{ID: "bob", Type: "service"}
	if u, _ := f("bob"); !reflect.DeepEqual(u, (auth.Principal{ID: "bob", Type: auth.TypeService})) {
		t.Fatalf("service bob naming bob: %+v, want itself", u)
	}
	p = &auth.Principal{ID: "billing", Type: "service", CanActFor: []string{"bob"}}
	if u, err := f("bob"); !reflect.DeepEqual(u, user("bob")) || err != nil {
		t.Fatal(u, err)
	}
	if _, err := f("carol"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("service granted bob acting for carol: %v", err)
	}
	p = &auth.Principal{ID: "ops", Type: "service", CanActFor: []string{auth.AnyUser}}
	if u, err := f("carol"); !reflect.DeepEqual(u, user("carol")) || err != nil {
		t.Fatal(u, err)
	}
	// A user's grant (not loadable from a keys file) is ignored.
	p = &auth.Principal{ID: "mallory", Type: "user", CanActFor: []string{auth.AnyUser}}
	if _, err := f("bob"); !errors.Is(err, ErrForbidden) {
		t.Fatal(err)
	}
	// The anonymous caller of an open server names its user.
	p = &auth.Principal{ID: "anonymous", Type: "anonymous"}
	if u, _ := f("bob"); !reflect.DeepEqual(u, user("bob")) {
		t.Fatal(u)
	}
	if u, _ := f(""); !reflect.DeepEqual(u, user(DefaultUserID)) {
		t.Fatal(u)
	}
}

// Executions are reached by id and type: a service bob is not the user bob.
func TestMayAccess(t *testing.T) {
	bob := auth.Principal{ID: "bob", Type: auth.TypeUser}
	for _, tc := range []struct {
		caller *auth.Principal
		owner  auth.Principal
		want   bool
	}{
		{&auth.Principal{ID: "bob", Type: auth.TypeUser}, bob, true},
		{&auth.Principal{ID: "bob"}, bob, true}, // an unset type is a user
		{&auth.Principal{ID: "bob", Type: auth.TypeService}, bob, false},
		{&auth.Principal{ID: "bob", Type: auth.TypeUser}, auth.Principal{ID: "bob", Type: auth.TypeService}, false},
		{&auth.Principal{ID: "bob", Type: auth.TypeService}, auth.Principal{ID: "bob", Type: auth.TypeService}, true},
		{&auth.Principal{ID: "billing", Type: auth.TypeService, CanActFor: []string{"bob"}}, bob, true},
		{&auth.Principal{ID: "billing", Type: auth.TypeService, CanActFor: []string{"*"}}, auth.Principal{ID: "bob", Type: auth.TypeService}, false},
		{&auth.Principal{ID: "alice", Type: auth.TypeUser}, bob, false},
		{&auth.Principal{ID: "anonymous", Type: auth.TypeAnonymous}, bob, true},
		{nil, bob, true},
	} {
		if got := MayAccess(tc.caller, tc.owner); got != tc.want {
			t.Errorf("MayAccess(%+v, %+v) = %v, want %v", tc.caller, tc.owner, got, tc.want)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "tab\tnl\ncr\r\x01\x1f", "<&> html", "é ü 日本", "bad \xff utf8", "sep \u2028 \u2029"} {
		want, _ := json.Marshal(s)
		var w, g string
		_ = json.Unmarshal(want, &w)
		if err := json.Unmarshal(appendString(nil, s), &g); err != nil || g != w {
			t.Errorf("%q: got %s (%v)", s, appendString(nil, s), err)
		}
	}
}

func TestFastEncodingOnFixture(t *testing.T) {
	s, err := New(Options{Extra: catalogtest.Definitions(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []catalog.GetToolsOptions{{Format: catalog.FormatOpenAI, Strict: true}, {Format: catalog.FormatMCP, IncludeAsync: true}, {Format: catalog.FormatAISDK, Toolkits: []string{"gmail"}}} {
		res, err := s.Get(opts)
		if err != nil {
			t.Fatal(err)
		}
		fast, err := appendGetResult(nil, res)
		if err != nil {
			t.Fatal(err)
		}
		slow, _ := json.Marshal(res)
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		_ = json.Unmarshal(slow, &b)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%+v: encodings differ", opts)
		}
	}
}
