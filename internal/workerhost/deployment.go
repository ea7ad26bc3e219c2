package workerhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/internal/config"
)

// Deployment opts a worker into Temporal Worker Versioning: it serves one
// build (BuildID) of a worker deployment (Name). Turns and executions
// are pinned to the build that started them, so a deploy drains them on
// the old build instead of replaying them on new code; sessions move to
// the deployment's current build (docs/deploy.md, Deploying a new build).
// The zero value is an unversioned worker.
type Deployment struct {
	// Name of the worker deployment (EVE_DEPLOYMENT_NAME); empty: the
	// worker's task queue.
	Name string
	// BuildID names this build (EVE_BUILD_ID); empty: unversioned.
	BuildID string
	// MakeCurrent makes this build the deployment's current one once the
	// server sees the worker's pollers (EVE_MAKE_CURRENT=true), as
	// `temporal worker deployment set-current-version` does. For a single
	// worker or a first deploy; a fleet sets it once, after its new
	// workers are up.
	MakeCurrent bool
}

// DeploymentFromEnv reads the deployment from EVE_DEPLOYMENT_NAME,
// EVE_BUILD_ID and EVE_MAKE_CURRENT.
func DeploymentFromEnv() Deployment {
	mc, _ := strconv.ParseBool(os.Getenv("EVE_MAKE_CURRENT"))
	return Deployment{Name: config.Env("EVE_DEPLOYMENT_NAME", ""), BuildID: config.Env("EVE_BUILD_ID", ""), MakeCurrent: mc}
}

// Bind registers the versioning flags, defaulting from the environment.
func (d *Deployment) Bind(fs *pflag.FlagSet) {
	env := DeploymentFromEnv()
	fs.StringVar(&d.BuildID, "build-id", env.BuildID, "this build's id: opts the worker into Temporal Worker Versioning, turns stay on the build that started them (env EVE_BUILD_ID; docs/deploy.md)")
	fs.StringVar(&d.Name, "deployment-name", env.Name, "worker deployment of --build-id (env EVE_DEPLOYMENT_NAME; default: the task queue)")
	fs.BoolVar(&d.MakeCurrent, "make-current", env.MakeCurrent, "make --build-id the deployment's current build once this worker polls (env EVE_MAKE_CURRENT)")
}

// Versioned reports whether the worker uses Worker Versioning.
func (d Deployment) Versioned() bool { return d.BuildID != "" }

// ForTaskQueue fills in an empty Name with the task queue.
func (d Deployment) ForTaskQueue(taskQueue string) Deployment {
	if d.Versioned() && d.Name == "" {
		d.Name = taskQueue
	}
	return d
}

// Validate rejects settings the server would refuse, saying which flag to
// change.
func (d Deployment) Validate() error {
	if !d.Versioned() {
		if d.Name != "" || d.MakeCurrent {
			return errors.New("--deployment-name and --make-current need --build-id (EVE_BUILD_ID): set the build's id, or unset them for an unversioned worker")
		}
		return nil
	}
	// Temporal reserves both in deployment names (version strings were
	// "<name>.<build id>", now "<name>:<build id>").
	if strings.ContainsAny(d.Name, ".:") {
		return fmt.Errorf("deployment name %q contains '.' or ':', which Temporal reserves: set --deployment-name (EVE_DEPLOYMENT_NAME; the default is the task queue)", d.Name)
	}
	return nil
}

// Version is the deployment version the worker serves.
func (d Deployment) Version() worker.WorkerDeploymentVersion {
	return worker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID}
}

// options are the SDK's deployment options. No default behaviour: every
// eve workflow declares its own (workflows/register.go), and the SDK
// refuses to register one that does not.
func (d Deployment) options() worker.DeploymentOptions {
	if !d.Versioned() {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{UseVersioning: true, Version: d.Version(), DefaultVersioningBehavior: workflow.VersioningBehaviorUnspecified}
}

// MakeCurrent makes d's build the current version of its deployment,
// waiting (up to ctx) for the server to register the version, which it
// does when the build's workers first poll. Already current: nothing to do.
func MakeCurrent(ctx context.Context, c client.Client, d Deployment, logger *slog.Logger) error {
	if !d.Versioned() {
		return nil
	}
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	var last error
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil {
			if cur := desc.Info.RoutingConfig.CurrentVersion; cur != nil && *cur == d.Version() {
				return nil
			}
			_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: d.BuildID, ConflictToken: desc.ConflictToken})
			if err == nil {
				if logger != nil {
					logger.Info("build is now current", "deployment", d.Name, "buildId", d.BuildID)
				}
				return nil
			}
		}
		// Not found (no poll registered the version yet), not ready, or a
		// concurrent change (conflict token): ask again.
		var notFound *serviceerror.NotFound
		var precondition *serviceerror.FailedPrecondition
		if !errors.As(err, &notFound) && !errors.As(err, &precondition) && !isTransient(err) {
			return fmt.Errorf("make build %s of deployment %s current: %w", d.BuildID, d.Name, err)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("make build %s of deployment %s current: the server has not registered the version (%v); check that this worker polls, then run `temporal worker deployment set-current-version --deployment-name %s --build-id %s`", d.BuildID, d.Name, last, d.Name, d.BuildID)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func isTransient(err error) bool {
	var unavailable *serviceerror.Unavailable
	var internal *serviceerror.Internal
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &internal) || errors.As(err, &deadline)
}
