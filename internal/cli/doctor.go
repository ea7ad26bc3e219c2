package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/eve-temporal/eve/internal/config"
	"github.com/eve-temporal/eve/internal/visibility"
)

func newDoctorCommand(app App) *cobra.Command {
	var (
		tc     config.Temporal
		apiURL string
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the Temporal connection, namespace, search attributes, workers and API server, and say how to fix each failure",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tc.TaskQueue == "" {
				// The default queue is the agent's name: build it to learn that.
				a, err := app.agent()
				if err != nil {
					return fmt.Errorf("%w (or name the task queue to check with --task-queue or EVE_TASK_QUEUE)", err)
				}
				if err := tc.UseAgentTaskQueue(a.Name); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			if failed := runDoctor(ctx, cmd.OutOrStdout(), app.name(), tc, apiURL); failed > 0 {
				return fmt.Errorf("%d check(s) failed", failed)
			}
			return nil
		},
	}
	tc.Bind(cmd.Flags(), app.TaskQueue)
	cmd.Flags().StringVar(&apiURL, "url", config.Env("EVE_URL", ""), "API server to check (env EVE_URL); empty skips the check")
	return cmd
}

// runDoctor prints one line per check and returns the number of failures.
// Its fixes name the commands of bin, the binary running it.
func runDoctor(ctx context.Context, out io.Writer, bin string, tc config.Temporal, apiURL string) int {
	failed := 0
	ok := func(format string, a ...any) { fmt.Fprintf(out, "ok    "+format+"\n", a...) }
	bad := func(fix, format string, a ...any) {
		failed++
		fmt.Fprintf(out, "FAIL  "+format+"\n      fix: %s\n", append(a, fix)...)
	}
	c, err := tc.Dial(ctx, nil, nil)
	if err != nil {
		bad("run a local Temporal dev server with `"+bin+" dev` (the whole stack), or set TEMPORAL_ADDRESS (and TEMPORAL_API_KEY or TLS flags for Temporal Cloud)", "connect: %v", err)
		return failed
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		bad("check the server's logs; the frontend answers but reports unhealthy", "health of %s: %v", tc.Address, err)
	} else {
		ok("Temporal at %s answers", tc.Address)
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: tc.Namespace}); err != nil {
		bad(fmt.Sprintf("create it: `temporal operator namespace create --namespace %s` (or in the Temporal Cloud console), or set TEMPORAL_NAMESPACE", tc.Namespace), "namespace %q: %v", tc.Namespace, err)
		return failed
	}
	ok("namespace %q exists", tc.Namespace)
	missing, err := visibility.Missing(ctx, c, tc.Namespace)
	switch {
	case err != nil:
		bad("grant the operator API, or register them in the Temporal Cloud console: "+strings.Join(visibility.Commands(tc.Namespace), "; "), "search attributes: %v", err)
	case len(missing) > 0:
		bad(strings.Join(visibility.Commands(tc.Namespace), "; "), "search attributes missing: %s (parked sessions cannot be found by status, and the inbox answers 503)", strings.Join(missing, ", "))
	default:
		ok("eve's search attributes are registered (EveStatus, EveTools, EveSessionId and the inbox's)")
	}
	for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
		resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: tc.Namespace, TaskQueue: &taskqueuepb.TaskQueue{Name: tc.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}, TaskQueueType: kind,
		})
		name := strings.ToLower(strings.TrimPrefix(kind.String(), "TASK_QUEUE_TYPE_"))
		switch {
		case err != nil:
			bad("check the task queue name (EVE_TASK_QUEUE)", "task queue %q (%s): %v", tc.TaskQueue, name, err)
		case len(resp.GetPollers()) == 0:
			bad("start a worker on this task queue: `"+bin+" worker` (or `"+bin+" dev`), with the same EVE_TASK_QUEUE and TEMPORAL_NAMESPACE", "no %s pollers on task queue %q", name, tc.TaskQueue)
		default:
			ok("%d %s poller(s) on task queue %q", len(resp.GetPollers()), name, tc.TaskQueue)
		}
	}
	if apiURL != "" {
		if err := checkAPI(ctx, apiURL); err != nil {
			bad("start it with `"+bin+" serve` (or `"+bin+" dev`), or fix EVE_URL", "API server %s: %v", apiURL, err)
		} else {
			ok("API server %s is ready", apiURL)
		}
	}
	return failed
}

func checkAPI(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/eve/v1/health", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}
