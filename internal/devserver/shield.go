package devserver

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// shieldDeadline is the least time a request of a Dial client has on the
// server, whatever its caller's deadline.
const shieldDeadline = 30 * time.Second

// shieldCancellation keeps a caller's cancellation, or a short deadline,
// from reaching the dev server in the middle of a request: cancelled
// requests are what wedge its SQLite connection (wedge.go). The caller
// gets its context's error at once; the request goes on on the server
// for at least shieldDeadline, and its answer is dropped. Long polls
// (Poll*TaskQueue) wait in memory on the server and go through as they
// are.
func shieldCancellation(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if ctx.Done() == nil || isTaskQueuePoll(method) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	deadline := time.Now().Add(shieldDeadline)
	if d, ok := ctx.Deadline(); ok && d.After(deadline) {
		deadline = d
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- invoker(rctx, method, req, reply, cc, opts...)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// ShieldOption is the gRPC dial option that shields a client's requests
// to a dev server as Dial's are (for clients Dial does not make).
func ShieldOption() grpc.DialOption { return grpc.WithChainUnaryInterceptor(shieldCancellation) }

func isTaskQueuePoll(method string) bool {
	m := method[strings.LastIndexByte(method, '/')+1:]
	return strings.HasPrefix(m, "Poll") && strings.HasSuffix(m, "TaskQueue")
}
