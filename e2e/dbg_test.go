package e2e

import (
	"testing"
	"time"

	"github.com/eve-temporal/eve/internal/api"
)

func TestDbgLease(t *testing.T) {
	e := demoAPI(t, func(o *api.Options) { o.LeaseDuration = time.Second; o.HeartbeatInterval = 200 * time.Millisecond })
	ctx := e.Ctx(60 * time.Second)
	first, _ := e.C.SendAndWait(ctx, "", "hi", nil)
	st := e.C.Stream(ctx, first.SessionID, 0, nil)
	for i := 0; i < 8 && st.Next(); i++ {
		t.Logf("%d %s opened=%d leases=%d", st.Index(), st.Event().Type, st.Opened, st.Leases)
	}
	go func() { time.Sleep(3 * time.Second); e.C.Send(ctx, first.SessionID, "hello") }()
	st.Next()
	t.Logf("%d %s opened=%d leases=%d", st.Index(), st.Event().Type, st.Opened, st.Leases)
}
