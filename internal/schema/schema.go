// Package schema is eve's one JSON Schema stack (santhosh-tekuri/jsonschema
// v6): it compiles and applies schemas for tools, the catalog and workflow
// checks alike, with one configuration — draft 2020-12 unless the schema
// names another draft with $schema, formats asserted, and nothing loaded
// from outside the document (ErrExternalRef).
//
// Deriving a schema from a Go type (tools.Func) is a different job, done
// with github.com/google/jsonschema-go; what it derives is compiled here.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
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

// RefError is a compile error for a $ref (or $schema) outside the schema.
// It wraps ErrExternalRef.
type RefError struct{ Ref string }

func (e *RefError) Error() string {
	return fmt.Sprintf("$ref %q cannot be resolved: %v", e.Ref, ErrExternalRef)
}
func (e *RefError) Unwrap() error { return ErrExternalRef }

// MetaError is a compile error for a schema that does not meta-validate.
// Violations lists each problem (locations point into the schema).
type MetaError struct {
	Violations []Violation
	err        error
}

func (e *MetaError) Error() string { return flatten(e.err) }

// Violation is one way a value breaks a schema.
type Violation struct {
	// InstanceLocation is a JSON pointer into the value ("" is the root).
	InstanceLocation string
	// KeywordLocation is a JSON pointer into the schema, to the keyword
	// that failed (references followed); empty for meta-validation.
	KeywordLocation string
	Message         string
}

// Compiler compiles schemas with eve's settings. It is not safe for
// concurrent use; one compiler may compile many schemas.
type Compiler struct {
	c *jsonschema.Compiler
	n int
}

// NewCompiler returns a compiler.
func NewCompiler() *Compiler { return &Compiler{c: newCompiler()} }

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refusingLoader{})
	return c
}

// Compile meta-validates and compiles raw; name is used in its resource
// URL. Errors: *RefError (errors.Is ErrExternalRef) for an external ref,
// *MetaError for a schema that does not meta-validate, others for JSON that
// does not parse or a schema that does not compile.
func (c *Compiler) Compile(name string, raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	c.n++
	url := fmt.Sprintf("mem:///%d/%s.json", c.n, strings.NewReplacer(" ", "_", "/", "_", "#", "_").Replace(name))
	if err := c.c.AddResource(url, doc); err != nil {
		c.c = newCompiler()
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.c.Compile(url)
	if err != nil {
		// A compiler that failed midway may hold partial state; start afresh.
		c.c = newCompiler()
		var lue *jsonschema.LoadURLError
		var sve *jsonschema.SchemaValidationError
		switch {
		case errors.As(err, &lue):
			return nil, &RefError{Ref: lue.URL}
		case errors.As(err, &sve):
			me := &MetaError{err: err}
			var ve *jsonschema.ValidationError
			if errors.As(sve.Err, &ve) {
				me.Violations = violations(ve, false)
			}
			return nil, me
		}
		return nil, fmt.Errorf("does not compile: %s", flatten(err))
	}
	return &Schema{raw: append(json.RawMessage(nil), raw...), compiled: sch}, nil
}

// Compile meta-validates and compiles raw with a fresh Compiler. name is
// used in errors and as the resource URL. Nothing is loaded from outside
// the document: a $ref to a file://, http(s):// or any other URL fails
// with an error naming the ref (errors.Is ErrExternalRef).
func Compile(name string, raw json.RawMessage) (*Schema, error) {
	s, err := NewCompiler().Compile(name, raw)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	return s, nil
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

// Violations checks a JSON document against the schema and lists every
// violation, each with its keyword location, sorted by location. It
// returns an error only when doc is not JSON.
func (s *Schema) Violations(doc json.RawMessage) ([]Violation, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return violations(ve, true), nil
	}
	return []Violation{{Message: err.Error()}}, nil
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

var printer = message.NewPrinter(language.English)

// violations flattens a validation error to its leaves, in a stable order.
// With keywords, each leaf gets its keyword location in the schema
// (meta-validation errors point into the metaschema, so they do not).
func violations(ve *jsonschema.ValidationError, keywords bool) []Violation {
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			kw := ""
			if keywords {
				if _, frag, ok := strings.Cut(e.SchemaURL, "#"); ok {
					kw = frag
				}
				kw += pointerOf(e.ErrorKind.KeywordPath())
			}
			out = append(out, Violation{
				InstanceLocation: pointerOf(e.InstanceLocation),
				KeywordLocation:  kw,
				Message:          e.ErrorKind.LocalizedString(printer),
			})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].InstanceLocation != out[j].InstanceLocation {
			return out[i].InstanceLocation < out[j].InstanceLocation
		}
		return out[i].KeywordLocation < out[j].KeywordLocation
	})
	return out
}

func pointerOf(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		if strings.ContainsAny(t, "~/") {
			t = strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
		}
		b.WriteString(t)
	}
	return b.String()
}
