package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/approval"
	"github.com/eve-temporal/eve/model/scripted"
	"github.com/eve-temporal/eve/tools"
)

//go:embed rules.yaml
var rules []byte

// Agent is the trips agent: one workflow tool, approved by a person.
func Agent() (*agent.Agent, error) {
	m, err := scripted.Parse(rules)
	if err != nil {
		return nil, err
	}
	reg := tools.NewRegistry()
	if err := reg.Register(BookTripTool()); err != nil {
		return nil, err
	}
	return &agent.Agent{Name: "trips", Model: m, Tools: reg, LocalModel: true, RegisterWorker: Register}, nil
}

// BookTripTool offers the BookTrip workflow to the model. A person
// approves each booking before the workflow starts.
func BookTripTool() *tools.Tool {
	t := tools.DefineWorkflow("book_trip", "Book a flight and a hotel in a city, all or nothing.",
		json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"],"additionalProperties":false}`),
		json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"},"hotel":{"type":"string"}},"required":["flight","hotel"]}`),
		tools.Workflow{Type: "BookTrip", ExecutionTimeout: 10 * time.Minute})
	t.Approval = approval.Always()
	return t
}

// Register puts the saga and its activities on the agent's worker.
func Register(w worker.Registry) {
	w.RegisterWorkflowWithOptions(BookTrip, workflow.RegisterOptions{Name: "BookTrip"})
	w.RegisterActivityWithOptions(ReserveFlight, activity.RegisterOptions{Name: "ReserveFlight"})
	w.RegisterActivityWithOptions(CancelFlight, activity.RegisterOptions{Name: "CancelFlight"})
	w.RegisterActivityWithOptions(ReserveHotel, activity.RegisterOptions{Name: "ReserveHotel"})
}

// TripInput is the tool's input; Trip its output.
type TripInput struct {
	City string `json:"city"`
}

type Trip struct {
	Flight string `json:"flight"`
	Hotel  string `json:"hotel"`
}

// BookTrip is a saga that knows nothing of eve: each step that succeeded
// is compensated when a later one fails.
func BookTrip(ctx workflow.Context, in TripInput) (Trip, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{"NoVacancy"}},
	})
	var trip Trip
	if err := workflow.ExecuteActivity(ctx, "ReserveFlight", in.City).Get(ctx, &trip.Flight); err != nil {
		return Trip{}, err
	}
	if err := workflow.ExecuteActivity(ctx, "ReserveHotel", in.City).Get(ctx, &trip.Hotel); err != nil {
		// Compensate in a context that a cancelled turn does not cancel.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		if cerr := workflow.ExecuteActivity(dctx, "CancelFlight", trip.Flight).Get(dctx, nil); cerr != nil {
			return Trip{}, errors.Join(err, cerr)
		}
		return Trip{}, temporal.NewNonRetryableApplicationError("no hotel in "+in.City+"; the flight "+trip.Flight+" was cancelled", "TripFailed", err)
	}
	return trip, nil
}

// Bookings records what the mock activities did (for the tests).
var Bookings = &bookings{}

type bookings struct{ log []string }

func (b *bookings) add(s string) { b.log = append(b.log, s) }

// ReserveFlight reserves a flight (mock).
func ReserveFlight(_ context.Context, city string) (string, error) {
	id := "FL-" + strings.ToUpper(city)
	Bookings.add("reserve " + id)
	return id, nil
}

// CancelFlight cancels a reserved flight (mock).
func CancelFlight(_ context.Context, id string) error {
	Bookings.add("cancel " + id)
	return nil
}

// ReserveHotel reserves a hotel (mock): Atlantis has none.
func ReserveHotel(_ context.Context, city string) (string, error) {
	if strings.EqualFold(city, "atlantis") {
		return "", temporal.NewNonRetryableApplicationError("no vacancy in "+city, "NoVacancy", nil)
	}
	id := "HT-" + strings.ToUpper(city)
	Bookings.add("reserve " + id)
	return id, nil
}
