// Package e2e holds end-to-end tests of eve against a real Temporal dev
// server that the tests start themselves.
package e2e
