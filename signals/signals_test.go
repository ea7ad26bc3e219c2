package signals

import "testing"

// Turn workflow ids are part of the contract: recorded histories, the
// the id checks of session URLs and hop counting all derive them.
func TestTurnWorkflowID(t *testing.T) {
	if got := TurnWorkflowID("ses_1", TurnID(3)); got != "ses_1/turn_3" {
		t.Fatalf("TurnWorkflowID = %q, want ses_1/turn_3", got)
	}
}
