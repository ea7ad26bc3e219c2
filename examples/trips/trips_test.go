package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"
)

// The saga books both or neither: a hotel that fails cancels the flight,
// and the tool's call fails with the saga's message.
func TestBookTrip(t *testing.T) {
	for _, c := range []struct {
		city string
		want Trip
		err  string
		log  []string
	}{
		{"Lisbon", Trip{Flight: "FL-LISBON", Hotel: "HT-LISBON"}, "", []string{"reserve FL-LISBON", "reserve HT-LISBON"}},
		{"Atlantis", Trip{}, "no hotel in Atlantis; the flight FL-ATLANTIS was cancelled", []string{"reserve FL-ATLANTIS", "cancel FL-ATLANTIS"}},
	} {
		t.Run(c.city, func(t *testing.T) {
			Bookings.log = nil
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			Register(env)
			env.ExecuteWorkflow(BookTrip, TripInput{City: c.city})
			var got Trip
			err := env.GetWorkflowError()
			if err == nil {
				err = env.GetWorkflowResult(&got)
			}
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("trip (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.log, Bookings.log); diff != "" {
				t.Errorf("bookings (-want +got):\n%s", diff)
			}
		})
	}
}

// The agent builds: its workflow tool passes the registry's checks.
func TestAgent(t *testing.T) {
	a, err := Agent()
	if err != nil {
		t.Fatal(err)
	}
	if tool, ok := a.Tools.Get("book_trip"); !ok || tool.Kind() != "workflow" {
		t.Fatalf("book_trip: %v", tool)
	}
}
