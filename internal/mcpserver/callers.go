package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
)

// A caller's own tools are those the tools API lists for it alone
// (toolsapi.Service.GetFor: dynamic connections, listed for the caller's
// session auth). The SDK's registry holds the shared tools only, so these
// are added to the caller's tools/list and answered before the SDK looks
// a tools/call up; another caller's tools/call of one finds nothing
// (unknown tool). They are plain calls: a tool listed per caller that
// would ask a person, ask its MCP client for input, or run as a task is
// not offered.

// ownTools are a caller's own entries, in catalog order.
type ownTools struct {
	list   []*entry
	byName map[string]*entry // by MCP tool name
}

// callerEntries lists user's own tools (the tools API caches the listing).
func (s *Server) callerEntries(user string) ownTools {
	out := ownTools{byName: map[string]*entry{}}
	p := s.svc.UserOf(user)
	kits := s.svc.OwnToolkits(p)
	if len(kits) == 0 {
		return out
	}
	res, err := s.svc.GetFor(p, catalog.GetToolsOptions{Format: catalog.FormatMCP, Toolkits: kits, MCPWireNames: s.opts.WireNames})
	if err != nil {
		s.log.Warn("mcpserver: a caller's own tools could not be listed", "principalId", p.ID, "err", err)
		return out
	}
	shared := s.svc.Catalog()
	for i, t := range res.MCP() {
		def := res.Raw[i]
		if _, ok := shared.Lookup(def.Name); ok {
			continue // served by the SDK, as everyone's
		}
		rt, ok := s.svc.ToolFor(p, def.Name)
		if !ok || rt.ClientInput || s.svc.ExecutableFor(p, def.Name, false) != nil {
			continue
		}
		if s.opts.BareNames {
			t.Name = rt.Name
		}
		if s.entries[t.Name] != nil || out.byName[t.Name] != nil {
			continue // a shared tool has the MCP name
		}
		desc, err := json.Marshal(t)
		if err != nil {
			continue
		}
		e := &entry{canonical: def.Name, desc: desc}
		out.list = append(out.list, e)
		out.byName[t.Name] = e
	}
	return out
}

// callOwn runs a plain tools/call of one of user's own tools, answering
// as the SDK answers a registered tool's call.
func (s *Server) callOwn(ctx context.Context, e *entry, user string, req *mcp.CallToolRequest) (mcp.Result, error) {
	res, err := s.callEntry(ctx, e, user, req)
	if err != nil {
		return nil, err
	}
	if res.Content == nil {
		res.Content = []mcp.Content{} // never "null", as the SDK does
	}
	return res, nil
}
