// Package payloadstore keeps eve's large data outside Temporal's history:
// payloads above a size threshold (through the Go SDK's External Storage)
// and sessions' conversations (content-addressed messages). Every process
// that reads a session's payloads — workers, API servers, the CLI, the bench
// and the tests — must open the same store.
//
// One setting picks the store: EVE_PAYLOAD_STORE=file:<dir> (the default,
// file:.eve/payloads) or s3://bucket/prefix with the standard AWS variables.
package payloadstore

import (
	"context"
	"errors"
)

// ErrNotFound means no object has that key.
var ErrNotFound = errors.New("payloadstore: not found")

// Store is a flat key → bytes object store. Keys are slash-separated paths
// of [a-zA-Z0-9._-] segments. Writers in eve only write content-addressed
// keys, so writing a key twice writes the same bytes.
type Store interface {
	// Put writes data under key, replacing what was there.
	Put(ctx context.Context, key string, data []byte) error
	// Get reads the object under key; a missing key is an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Location says where objects go ("file:/abs/dir", "s3://bucket/prefix"),
	// for logs and error messages. It never holds credentials.
	Location() string
}
