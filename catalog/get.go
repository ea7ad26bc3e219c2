package catalog

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// selection is the tools one Get selects, with their name map. Selections
// are cached per key: agents ask for the same bundle every turn, and
// filtering 10,000 tools and building their maps costs more than shaping
// them.
type selection struct {
	entries []*entry
	raw     []Definition
	nameMap ToolNameMap
}

// maxCachedSelections bounds the selection cache (one entry per distinct
// toolkits/capability/MCP/includeAsync combination).
const maxCachedSelections = 1024

// Get selects tools (toolkits, capability; for MCP, async tools only with
// IncludeAsync) and shapes them in the requested format, with the name map
// for exactly the selected tools. Tools are sorted by canonical name.
//
// Raw and NameMap are shared between results for the same selection: treat
// them as read-only. Tools is new on every call.
func (c *Catalog) Get(opts GetToolsOptions) (GetToolsResult, error) {
	format := opts.Format
	if format == "" {
		format = FormatCanonical
	}
	switch format {
	case FormatCanonical, FormatAnthropic, FormatOpenAI, FormatAISDK, FormatMCP:
	default:
		return GetToolsResult{}, fmt.Errorf("catalog: unknown format %q (want one of canonical, anthropic, openai, ai-sdk, mcp)", format)
	}
	s, err := c.selectTools(opts.Toolkits, opts.Capability, format == FormatMCP, opts.IncludeAsync, format == FormatMCP && !opts.MCPWireNames)
	if err != nil {
		return GetToolsResult{}, err
	}
	sel := s.entries
	res := GetToolsResult{Format: format, Raw: s.raw, NameMap: s.nameMap}

	switch format {
	case FormatCanonical:
		res.Tools = s.raw
	case FormatAnthropic:
		tools := make([]AnthropicTool, len(sel))
		for i, e := range sel {
			tools[i] = AnthropicTool{Name: e.wire, Description: e.def.Description, InputSchema: e.def.InputSchema}
		}
		res.Tools = tools
	case FormatOpenAI:
		tools := make([]OpenAITool, len(sel))
		for i, e := range sel {
			fn := OpenAIFunctionDecl{Name: e.wire, Description: e.def.Description, Parameters: e.def.InputSchema}
			if opts.Strict {
				params, why := e.strictFor()
				strict := why == ""
				fn.Strict = &strict
				if strict {
					fn.Parameters = params
				} else {
					res.Warnings = append(res.Warnings, Warning{
						Tool:    e.def.Name,
						Code:    WarningStrictFallback,
						Message: "sent with strict:false: " + why,
					})
				}
			}
			tools[i] = OpenAITool{Type: "function", Function: fn}
		}
		res.Tools = tools
	case FormatAISDK:
		set := make(AISDKToolSet, len(sel))
		for _, e := range sel {
			set[e.wire] = AISDKTool{Description: e.def.Description, InputSchema: e.def.InputSchema, OutputSchema: e.def.OutputSchema}
		}
		res.Tools = set
	case FormatMCP:
		tools := make([]MCPTool, len(sel))
		for i, e := range sel {
			a := e.def.Annotations
			t := MCPTool{
				Name:         s.nameMap.CanonicalToWire[e.def.Name],
				Description:  e.def.Description,
				InputSchema:  e.def.InputSchema,
				OutputSchema: e.def.OutputSchema,
				Annotations: MCPToolAnnotations{
					ReadOnlyHint:    a.ReadOnly,
					DestructiveHint: a.Destructive,
					IdempotentHint:  a.Idempotent,
					OpenWorldHint:   a.OpenWorld,
				},
			}
			if a.Async {
				t.Execution = &MCPToolExecution{TaskSupport: "required"}
			}
			tools[i] = t
		}
		res.Tools = tools
	}
	return res, nil
}

// selectTools returns the (cached) selection for a filter.
func (c *Catalog) selectTools(toolkits []string, capability string, mcp, includeAsync, canonicalNames bool) (*selection, error) {
	tks := append([]string(nil), toolkits...)
	sort.Strings(tks)
	key := strings.Join(tks, ",") + "|" + capability + "|" + strconv.FormatBool(mcp) + "|" + strconv.FormatBool(mcp && includeAsync) + "|" + strconv.FormatBool(canonicalNames)
	if s, ok := c.selections.Load(key); ok {
		return s.(*selection), nil
	}
	keep, err := c.toolkitFilter(toolkits)
	if err != nil {
		return nil, err
	}
	s := &selection{}
	for _, e := range c.entries {
		if keep != nil && !keep[e.tk] {
			continue
		}
		if capability != "" && e.def.Capability != capability {
			continue
		}
		if mcp && e.def.Annotations.Async && !includeAsync {
			continue
		}
		s.entries = append(s.entries, e)
	}
	s.raw = make([]Definition, len(s.entries))
	s.nameMap = ToolNameMap{
		CanonicalToWire: make(map[string]string, len(s.entries)),
		WireToCanonical: make(map[string]string, len(s.entries)),
	}
	for i, e := range s.entries {
		s.raw[i] = e.def
		w := e.wire
		if canonicalNames {
			w = e.def.Name // MCP allows dots: canonical names go out as they are
		}
		s.nameMap.CanonicalToWire[e.def.Name] = w
		s.nameMap.WireToCanonical[w] = e.def.Name
	}
	if atomic.AddInt64(&c.selectionCount, 1) <= maxCachedSelections {
		c.selections.Store(key, s)
	}
	return s, nil
}
