package workerhost

import (
	"fmt"
	"strings"

	"github.com/eve-temporal/eve/agent"
	"github.com/eve-temporal/eve/model/providers"
)

// UseModelFromEnv replaces the agent's model with EVE_MODEL's, when set.
// Real providers run model steps as regular activities: their steps are
// long and streamed, and a crash must not silently repeat a paid call.
func UseModelFromEnv(a *agent.Agent) error {
	m, err := providers.FromEnv()
	if err != nil {
		return fmt.Errorf("%s: %w", providers.EnvModel, err)
	}
	if m == nil {
		return nil
	}
	a.Model = m
	a.LocalModel = strings.HasPrefix(m.ID(), "scripted:")
	a.StreamText = !a.LocalModel
	return nil
}
