// Package schema compiles and applies JSON Schemas (draft 2020-12 unless the
// schema names another draft with $schema).
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled, meta-validated schema.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
}

// ErrExternalRef is what compilation answers (wrapped, with the ref) for
// every $ref or $schema that points outside the schema itself: file://,
// http(s):// or any other URL. Schemas must be self-contained; only
// in-document refs ("#/$defs/x", "#anchor", refs to an embedded $id) resolve.
var ErrExternalRef = errors.New("external references are not allowed: schemas must be self-contained (use in-document refs such as \"#/$defs/name\")")

// refusingLoader is the compiler's URL loader: it loads nothing. The
// standard meta-schemas are built into the compiler and never reach it.
type refusingLoader struct{}

func (refusingLoader) Load(string) (any, error) { return nil, ErrExternalRef }

// Compile meta-validates and compiles raw. name is used in errors and as
// the resource URL. Nothing is loaded from outside the document: a $ref to a
// file://, http(s):// or any other URL fails with an error naming the ref
// (errors.Is ErrExternalRef).
func Compile(name string, raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	url := "mem:///" + strings.NewReplacer(" ", "_", "/", "_").Replace(name) + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		var lue *jsonschema.LoadURLError
		if errors.As(err, &lue) && errors.Is(lue.Err, ErrExternalRef) {
			return nil, fmt.Errorf("invalid JSON Schema: $ref %q cannot be resolved: %w", lue.URL, ErrExternalRef)
		}
		return nil, fmt.Errorf("invalid JSON Schema: %s", flatten(err))
	}
	return &Schema{raw: append(json.RawMessage(nil), raw...), compiled: sch}, nil
}

// Raw returns the schema's JSON.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// RootType returns the root "type" keyword when it is a single string.
func (s *Schema) RootType() string {
	var m struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(s.raw, &m) != nil {
		return ""
	}
	t, _ := m.Type.(string)
	return t
}

// ValidationError lists every way a value breaks a schema, each as
// "<JSON pointer>: <message>".
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string { return strings.Join(e.Problems, "; ") }

// Validate checks a JSON document against the schema.
func (s *Schema) Validate(doc json.RawMessage) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &ValidationError{Problems: []string{"(root): not valid JSON: " + err.Error()}}
	}
	return s.ValidateValue(v)
}

// ValidateValue checks a decoded value (from jsonschema.UnmarshalJSON or
// encoding/json with UseNumber) against the schema.
func (s *Schema) ValidateValue(v any) error {
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Problems: []string{err.Error()}}
	}
	var problems []string
	collect(*ve.DetailedOutput(), &problems)
	if len(problems) == 0 {
		problems = []string{flatten(err)}
	}
	sort.Strings(problems)
	return &ValidationError{Problems: problems}
}

func collect(u jsonschema.OutputUnit, out *[]string) {
	if u.Error != nil && len(u.Errors) == 0 {
		loc := u.InstanceLocation
		if loc == "" {
			loc = "(root)"
		}
		*out = append(*out, loc+": "+u.Error.String())
	}
	for _, e := range u.Errors {
		collect(e, out)
	}
}

func flatten(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
