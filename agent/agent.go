// Package agent bundles what a worker serves — tools, a model, limits — and
// registers eve's workflows and activities on a Temporal worker. Apps that
// build their own worker binary use it; cmd/worker uses it for the demo agent.
package agent

import (
	"errors"
	"log/slog"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/activities"
	"github.com/eve-temporal/eve/model"
	"github.com/eve-temporal/eve/signals"
	"github.com/eve-temporal/eve/tools"
	"github.com/eve-temporal/eve/workflows"
)

// Agent is one agent definition.
type Agent struct {
	Name   string
	System string
	Model  model.Model
	Tools  *tools.Registry
	// MaxSteps bounds model steps per turn (default 12).
	MaxSteps int
	// LocalModel runs model steps as local activities. Right for fast,
	// cheap models (the scripted one); real providers with long streamed
	// responses are better served by regular activities.
	LocalModel bool
	Logger     *slog.Logger
}

// Register adds eve's workflows and the agent's activities to w.
func Register(w worker.Registry, a *Agent) error {
	if a == nil || a.Model == nil {
		return errors.New("register agent: a model is required")
	}
	reg := a.Tools
	if reg == nil {
		reg = tools.NewRegistry()
	}
	rt := &workflows.Runtime{Config: workflows.Config{
		AgentName:  a.Name,
		ModelID:    a.Model.ID(),
		MaxSteps:   a.MaxSteps,
		LocalModel: a.LocalModel,
	}}
	w.RegisterWorkflowWithOptions(rt.Session, workflow.RegisterOptions{Name: signals.SessionWorkflow})
	w.RegisterWorkflowWithOptions(rt.Turn, workflow.RegisterOptions{Name: signals.TurnWorkflow})
	acts := &activities.Activities{Tools: reg, Model: a.Model, System: a.System, Logger: a.Logger}
	w.RegisterActivityWithOptions(acts.ModelStep, activity.RegisterOptions{Name: activities.ModelStepName})
	w.RegisterActivityWithOptions(acts.ExecuteTool, activity.RegisterOptions{Name: activities.ExecuteToolName})
	return nil
}
