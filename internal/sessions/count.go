package sessions

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
)

// CountQueries is a gRPC client interceptor that counts the QueryWorkflow
// calls made through a Temporal client into n (tests and the bench use it
// to see what streams cost).
func CountQueries(n *atomic.Int64) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/QueryWorkflow") {
			n.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
