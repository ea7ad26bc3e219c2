package mcpserver

// Progress of plain tools/call (MCP progress utility): a call that carries
// _meta.progressToken runs as an execution this layer watches; each new
// progress report of its tool (tools.Context.ReportProgress, recorded as
// the activity's heartbeat, so any instance reads it from Temporal) is
// sent to the client as notifications/progress until the call answers.

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/protocol"
)

// progressPoll is how often a watched execution's heartbeat is read.
const progressPoll = 200 * time.Millisecond

func (s *Server) callWithProgress(ctx context.Context, e *entry, user string, req *mcp.CallToolRequest, token any) (*mcp.CallToolResult, error) {
	res, err := s.svc.Execute(ctx, e.canonical, catalog.ExecuteToolOptions{UserID: user, Input: req.Params.Arguments, Mode: catalog.ModeAsync})
	if err != nil {
		return callResult(res, err)
	}
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.relayProgress(rctx, ctx, res.ID, token, req.Session)
	}()
	out, err := s.finish(ctx, res.ID)
	stop()
	wg.Wait() // no notification follows the answer
	return out, err
}

// relayProgress sends the execution's new progress reports until rctx
// ends; notifications go out on ctx, the request's, so they travel on the
// request's stream.
func (s *Server) relayProgress(rctx, ctx context.Context, id string, token any, ss *mcp.ServerSession) {
	tick := time.NewTicker(progressPoll)
	defer tick.Stop()
	var last *protocol.Progress
	for {
		st, _, err := s.svc.Describe(rctx, id)
		if err == nil && st.Progress != nil && !sameProgress(last, st.Progress) {
			p := st.Progress
			n := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p.Progress, Message: p.Message}
			if p.Total != nil {
				n.Total = *p.Total
			}
			if err := ss.NotifyProgress(ctx, n); err != nil {
				s.log.Debug("mcpserver: progress notification", "execution", id, "err", err)
			}
			last = p
		}
		if err == nil && st.Result.Status.Terminal() {
			return
		}
		select {
		case <-rctx.Done():
			return
		case <-tick.C:
		}
	}
}

func sameProgress(a, b *protocol.Progress) bool {
	if a == nil || b == nil {
		return a == b
	}
	at, bt := 0.0, 0.0
	if a.Total != nil {
		at = *a.Total
	}
	if b.Total != nil {
		bt = *b.Total
	}
	return a.Progress == b.Progress && at == bt && a.Message == b.Message
}
