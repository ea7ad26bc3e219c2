package workflows

// The external tests (package workflows_test) drive the registered
// workflows by their signals names; these aliases let them name the
// workflows' own input and output types, which no app needs.
type (
	SessionInput = sessionInput
	TurnInput    = turnInput
	TurnOutput   = turnOutput
)

const CodeMaxSteps = codeMaxSteps
