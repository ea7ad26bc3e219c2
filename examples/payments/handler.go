package main

// The payments team's side, which knows nothing of eve: a Nexus service
// whose refund operation starts the Refund workflow (look the charge up,
// then issue the refund: two activities), on a worker of its own namespace.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Names of the handler's side.
const (
	HandlerNamespace = "payments"
	HandlerTaskQueue = "refunds"
	ServiceName      = "payments"
	RefundOperation  = "refund"
)

// RefundInput is the operation's input; Refund its output.
type RefundInput struct {
	Charge string `json:"charge"`
}

type Refund struct {
	RefundID string `json:"refundId"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

// Charge is what LookupCharge finds.
type Charge struct {
	ID       string `json:"id"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
	Refunded bool   `json:"refunded"`
}

// RefundOp is the Nexus operation: it runs the Refund workflow in the
// handler's namespace, under an id derived from the caller's request id
// (a retried start reaches the same workflow).
var RefundOp = temporalnexus.NewWorkflowRunOperation(RefundOperation, RefundWorkflow,
	func(_ context.Context, in RefundInput, o nexus.StartOperationOptions) (client.StartWorkflowOptions, error) {
		return client.StartWorkflowOptions{ID: "refund-" + in.Charge + "-" + o.RequestID}, nil
	})

// RegisterHandler puts the service, its workflow and its activities on w.
func RegisterHandler(w worker.Worker) error {
	svc := nexus.NewService(ServiceName)
	if err := svc.Register(RefundOp); err != nil {
		return err
	}
	w.RegisterNexusService(svc)
	w.RegisterWorkflowWithOptions(RefundWorkflow, workflow.RegisterOptions{Name: "Refund"})
	w.RegisterActivityWithOptions(LookupCharge, activity.RegisterOptions{Name: "LookupCharge"})
	w.RegisterActivityWithOptions(IssueRefund, activity.RegisterOptions{Name: "IssueRefund"})
	return nil
}

// RefundWorkflow looks the charge up and refunds it in full.
func RefundWorkflow(ctx workflow.Context, in RefundInput) (Refund, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"NoSuchCharge", "AlreadyRefunded"}},
	})
	var c Charge
	if err := workflow.ExecuteActivity(ctx, "LookupCharge", in.Charge).Get(ctx, &c); err != nil {
		return Refund{}, err
	}
	if c.Refunded {
		return Refund{}, temporal.NewNonRetryableApplicationError("charge "+c.ID+" was already refunded", "AlreadyRefunded", nil)
	}
	var r Refund
	err := workflow.ExecuteActivity(ctx, "IssueRefund", c).Get(ctx, &r)
	return r, err
}

// LookupCharge finds a charge (mock): ch_refunded was refunded before, any
// charge ending in 0 does not exist.
func LookupCharge(_ context.Context, id string) (Charge, error) {
	if strings.HasSuffix(id, "0") {
		return Charge{}, temporal.NewNonRetryableApplicationError("no charge "+id, "NoSuchCharge", nil)
	}
	return Charge{ID: id, Amount: 4200, Currency: "EUR", Refunded: id == "ch_refunded"}, nil
}

// IssueRefund refunds a charge in full (mock).
func IssueRefund(_ context.Context, c Charge) (Refund, error) {
	return Refund{RefundID: "re_" + strings.TrimPrefix(c.ID, "ch_"), Amount: c.Amount, Currency: c.Currency}, nil
}

// runHandler is `payments handler`: the handler's worker, until SIGINT.
func runHandler(args []string) error {
	fs := flag.NewFlagSet("handler", flag.ContinueOnError)
	addr := fs.String("address", envOr("TEMPORAL_ADDRESS", "localhost:7233"), "Temporal frontend address")
	ns := fs.String("namespace", HandlerNamespace, "the handler's namespace")
	tq := fs.String("task-queue", HandlerTaskQueue, "the handler's task queue (the endpoint's target)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	c, err := client.Dial(client.Options{HostPort: *addr, Namespace: *ns})
	if err != nil {
		return fmt.Errorf("dial %s (namespace %s): %w", *addr, *ns, err)
	}
	defer c.Close()
	w := worker.New(c, *tq, worker.Options{})
	if err := RegisterHandler(w); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "payments handler: namespace %s, task queue %s\n", *ns, *tq)
	err = w.Run(workerInterrupt(ctx))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func workerInterrupt(ctx context.Context) <-chan any {
	ch := make(chan any)
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
