package catalog

import (
	"fmt"
)

// Get selects tools (toolkits, capability; for MCP, async tools only with
// IncludeAsync) and shapes them in the requested format, with the name map
// for exactly the selected tools. Tools are sorted by canonical name.
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
	keep, err := c.toolkitFilter(opts.Toolkits)
	if err != nil {
		return GetToolsResult{}, err
	}
	sel := make([]*entry, 0, len(c.entries))
	for _, e := range c.entries {
		if keep != nil && !keep[e.tk] {
			continue
		}
		if opts.Capability != "" && e.def.Capability != opts.Capability {
			continue
		}
		if format == FormatMCP && e.def.Annotations.Async && !opts.IncludeAsync {
			continue
		}
		sel = append(sel, e)
	}

	res := GetToolsResult{Format: format, Raw: make([]Definition, len(sel))}
	for i, e := range sel {
		res.Raw[i] = e.def
	}
	if format == FormatMCP {
		names := make([]string, len(sel))
		for i, e := range sel {
			names[i] = e.def.Name
		}
		res.NameMap = identityNameMap(names)
	} else {
		res.NameMap = ToolNameMap{
			CanonicalToWire: make(map[string]string, len(sel)),
			WireToCanonical: make(map[string]string, len(sel)),
		}
		for _, e := range sel {
			w := c.wire.CanonicalToWire[e.def.Name]
			res.NameMap.CanonicalToWire[e.def.Name] = w
			res.NameMap.WireToCanonical[w] = e.def.Name
		}
	}
	wire := func(e *entry) string { return res.NameMap.CanonicalToWire[e.def.Name] }

	switch format {
	case FormatCanonical:
		res.Tools = res.Raw
	case FormatAnthropic:
		tools := make([]AnthropicTool, len(sel))
		for i, e := range sel {
			tools[i] = AnthropicTool{Name: wire(e), Description: e.def.Description, InputSchema: e.def.InputSchema}
		}
		res.Tools = tools
	case FormatOpenAI:
		tools := make([]OpenAITool, len(sel))
		for i, e := range sel {
			fn := OpenAIFunctionDecl{Name: wire(e), Description: e.def.Description, Parameters: e.def.InputSchema}
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
			set[wire(e)] = AISDKTool{Description: e.def.Description, InputSchema: e.def.InputSchema, OutputSchema: e.def.OutputSchema}
		}
		res.Tools = set
	case FormatMCP:
		tools := make([]MCPTool, len(sel))
		for i, e := range sel {
			a := e.def.Annotations
			t := MCPTool{
				Name:         e.def.Name,
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
