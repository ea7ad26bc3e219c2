package workflows

import "github.com/eve-temporal/eve/signals"

// Version is eve's version, reported in session.started.
const Version = signals.Version
