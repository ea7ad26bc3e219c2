// Package httpjson writes the JSON answers of eve's HTTP servers (the
// session API, the tools API, completion URLs), so they all answer with the
// same headers and encoding.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// ContentType is the Content-Type of every JSON answer.
const ContentType = "application/json; charset=utf-8"

// SetHeaders sets the headers of a JSON answer: its Content-Type, and
// Cache-Control no-store (answers are per request, never cached).
func SetHeaders(h http.Header) {
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
}

// Write answers v as JSON with status. HTML characters are written as they
// are (<, >, &): answers are JSON, never embedded in HTML.
func Write(w http.ResponseWriter, status int, v any) {
	SetHeaders(w.Header())
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
