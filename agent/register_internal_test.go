package agent

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
)

// The SDK panics on a registration it refuses; the app's RegisterWorker
// reports it as an error that says how to fix it, and a registration that
// succeeds reports nothing.
func TestRegisterAppRecoversRefusals(t *testing.T) {
	err := registerApp(nil, func(worker.Registry) { panic("workflow type does not have a versioning behavior") })
	if err == nil || !strings.Contains(err.Error(), "versioning behavior") || !strings.Contains(err.Error(), "VersioningBehaviorPinned") {
		t.Fatalf("err %v", err)
	}
	ran := false
	if err := registerApp(nil, func(worker.Registry) { ran = true }); err != nil || !ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
}
