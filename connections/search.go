package connections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/tools"
)

// DefaultSearchAbove is the number of tools above which a set shows the
// model a search tool and a call tool instead of every descriptor.
const DefaultSearchAbove = 40

// searchTools replaces a set's tools with "<set>__search", which ranks
// them with the catalog's search (BM25F over names, parameters and
// descriptions), and "<set>__call", which calls one of them by name after
// checking its input against the tool's schema. The call tool asks for
// approval when the called tool would (a Once approval is recorded by the
// called tool's name, approval.AskOnce), within the called tool's own
// timeout and retry policy; identity pinning covers every connection of
// the set.
func (s *Set) searchTools(conns []*Connection, ts []*tools.Tool) ([]*tools.Tool, error) {
	if err := tools.Compile(ts...); err != nil {
		return nil, err
	}
	byName := make(map[string]*tools.Tool, len(ts))
	defs := make([]catalog.Definition, 0, len(ts))
	gated := false
	var timeout, heartbeat time.Duration
	maxOut, attempts := 0, int32(1)
	for _, t := range ts {
		byName[t.Name] = t
		d := catalog.FromTool(t.Remote.Connection, t.Name, t.Description, t.InputSchema, nil,
			catalog.Annotations{ReadOnly: t.Annotations.ReadOnly, Destructive: t.Annotations.Destructive, Idempotent: t.Annotations.Idempotent, OpenWorld: true})
		d.Name = t.Remote.Connection + "." + strings.TrimPrefix(t.Name, t.Remote.Connection+"__")
		defs = append(defs, d)
		if t.Approval.Kind() != approval.KindNever {
			gated = true
		}
		timeout = max(timeout, t.EffectiveTimeout())
		maxOut = max(maxOut, t.EffectiveMaxOutputBytes())
		attempts = max(attempts, t.EffectiveRetry().MaximumAttempts)
		heartbeat = max(heartbeat, t.HeartbeatTimeout)
	}
	cat, err := catalog.New(defs...)
	var le *catalog.LoadError
	if errors.As(err, &le) {
		// A tool the catalog refuses cannot be found by search; it can
		// still be called by name.
		bad := map[string]bool{}
		for _, p := range le.Problems {
			bad[p.Tool] = true
		}
		var ok []catalog.Definition
		for _, d := range defs {
			if !bad[d.Name] {
				ok = append(ok, d)
			}
		}
		cat, err = catalog.New(ok...)
	}
	if err != nil {
		return nil, fmt.Errorf("index the connections' tools for search: %w", err)
	}
	wire := func(d catalog.Definition) string {
		return d.Toolkit + "__" + strings.TrimPrefix(d.Name, d.Toolkit+".")
	}
	ids := make([]string, 0, len(conns))
	for _, c := range conns {
		ids = append(ids, c.identity())
	}
	sort.Strings(ids)
	identity := "sha256:" + digest(strings.Join(ids, "\x00"))[:32]

	search := &tools.Tool{
		Name: s.name + "__search",
		Description: fmt.Sprintf("Search the %d tools of the connected services (%s) by what they do. "+
			"Returns the best matches with their input schemas; call one with %s__call.", len(ts), connNames(conns), s.name),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"what the tool should do, or a connection prefix such as \"linear__\""},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query"]}`),
		Idempotent:  true,
		Annotations: tools.Annotations{ReadOnly: true, Idempotent: true},
		Toolkit:     s.name,
		Remote:      &tools.Remote{Connection: s.name, Tool: "search", Identity: identity},
		Execute: func(_ *tools.Context, raw json.RawMessage) (any, error) {
			var in struct {
				Query string `json:"query"`
				Limit int    `json:"limit"`
			}
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, tools.NonRetryable(err)
			}
			type hit struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			var hits []hit
			// "<connection>__" lists that connection's tools.
			if prefix, ok := strings.CutSuffix(strings.TrimSpace(in.Query), "__"); ok && !strings.Contains(prefix, " ") {
				for _, d := range cat.Definitions() {
					if d.Toolkit == prefix && (in.Limit <= 0 || len(hits) < in.Limit) {
						hits = append(hits, hit{wire(d), d.Description, d.InputSchema})
					}
				}
				return map[string]any{"tools": hits}, nil
			}
			res, err := cat.Search(catalog.SearchToolsOptions{Query: in.Query, Limit: in.Limit})
			if err != nil {
				return nil, tools.NonRetryable(err)
			}
			for _, d := range res.Tools {
				hits = append(hits, hit{wire(d), d.Description, d.InputSchema})
			}
			return map[string]any{"tools": hits}, nil
		},
	}
	find := func(raw json.RawMessage) (*tools.Tool, json.RawMessage, error) {
		var in struct {
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, nil, err
		}
		t := byName[in.Name]
		if t == nil {
			return nil, nil, fmt.Errorf("no connection tool named %q: find it with %s__search first", in.Name, s.name)
		}
		if len(in.Input) == 0 || string(in.Input) == "null" {
			in.Input = json.RawMessage(`{}`)
		}
		return t, in.Input, nil
	}
	call := &tools.Tool{
		Name:           s.name + "__call",
		Description:    fmt.Sprintf("Call a tool of the connected services by the name %s__search gave, with its input.", s.name),
		InputSchema:    json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"input":{"type":"object"}},"required":["name"]}`),
		Timeout:        timeout,
		MaxOutputBytes: maxOut,
		Annotations:    tools.Annotations{OpenWorld: true},
		Toolkit:        s.name,
		Remote:         &tools.Remote{Connection: s.name, Tool: "call", Identity: identity},
		Execute: func(ctx *tools.Context, raw json.RawMessage) (any, error) {
			t, input, err := find(raw)
			if err != nil {
				return nil, tools.NonRetryable(err)
			}
			if err := t.ValidateInput(input); err != nil {
				return nil, tools.NonRetryable(fmt.Errorf("invalid input for tool %s: %v. Call it again with input that matches its input schema", t.Name, err))
			}
			// The call tool retries for the set's most patient tool; each
			// tool is attempted at most as often as its own policy allows.
			if n := t.EffectiveRetry().MaximumAttempts; ctx.Attempt > n {
				return nil, tools.NonRetryable(fmt.Errorf("tool %s is not called again: an earlier attempt failed or was lost with its worker, and it allows %d", t.Name, n))
			}
			if t.HeartbeatTimeout > 0 {
				return t.Execute(ctx, input) // it heartbeats itself (a task)
			}
			return runBounded(ctx, t, heartbeat, input)
		},
	}
	if attempts > 1 {
		retry := taskRetry
		retry.MaximumAttempts = attempts
		call.Retry = &retry
	}
	call.HeartbeatTimeout = heartbeat
	if gated {
		call.Approval = approval.CustomContext(func(ctx context.Context, c approval.Context) (approval.Status, error) {
			t, input, err := find(c.ToolInput)
			if err != nil {
				return approval.Skip(), nil // the call fails without reaching anyone
			}
			switch t.Approval.Kind() {
			case approval.KindNever:
				return approval.Skip(), nil
			case approval.KindOnce:
				// Approved once by the called tool's name, as it would be
				// called without search.
				if c.IsApproved(t.Name) {
					return approval.Skip(), nil
				}
				return approval.AskOnce(t.Name), nil
			case approval.KindCustom:
				inner := c
				inner.ToolName, inner.ToolInput = t.Name, input
				inner.ToolAnnotations = &approval.ToolAnnotations{ReadOnly: t.Annotations.ReadOnly, Destructive: t.Annotations.Destructive,
					Idempotent: t.Annotations.Idempotent, OpenWorld: t.Annotations.OpenWorld}
				return t.Approval.Evaluate(ctx, inner)
			}
			return approval.Ask(), nil
		})
	}
	return []*tools.Tool{search, call}, nil
}

// runBounded runs t within its own timeout, heartbeating meanwhile when
// the call tool has a heartbeat timeout (a task tool in the set).
func runBounded(ctx *tools.Context, t *tools.Tool, heartbeat time.Duration, input json.RawMessage) (any, error) {
	cctx, cancel := context.WithTimeout(ctx, t.EffectiveTimeout())
	defer cancel()
	if heartbeat > 0 {
		go func() {
			tick := time.NewTicker(heartbeat / 4)
			defer tick.Stop()
			for {
				select {
				case <-cctx.Done():
					return
				case <-tick.C:
					ctx.Heartbeat()
				}
			}
		}()
	}
	inner := *ctx
	inner.Context = cctx
	return t.Execute(&inner, input)
}

func connNames(conns []*Connection) string {
	names := make([]string, 0, len(conns))
	for _, c := range conns {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}
