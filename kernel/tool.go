// Package kernel is the embedded SharedOS authority: it holds the tools registered
// for a turn, decides discovery and every call against the turn's grants, namespace
// settings, tool policy and budgets, and runs a tool only after an allow. The bridge
// asks it; it never speaks MCP.
package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sharedos/sharedos-run/policy"
)

// ReadWrite is a tool's declared effect class.
type ReadWrite string

// Effect classes.
const (
	Read  ReadWrite = "read"
	Write ReadWrite = "write"
)

// Tool is a managed tool as registered: its published face (name, description,
// schemas, hints, namespace, source) and its private parts (ceiling, requirement
// resolver, handler), which never leave the kernel.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage // nil when the tool declares none
	Namespace    string
	Source       string
	ReadWrite    ReadWrite
	ReadOnly     *bool // declared read-only hint; nil derives it from ReadWrite
	Destructive  *bool
	Idempotent   *bool

	// Ceiling is the most the tool can ever touch; discovery shows the tool when a
	// grant intersects it, and a call whose requirement falls outside it is refused.
	Ceiling policy.Capability
	// Requirement derives what one call needs from its parsed arguments.
	Requirement func(args map[string]any, ac policy.AccessContext) (policy.Requirement, error)
	// Handler runs the tool after the kernel has allowed the call. Its output must
	// be JSON-encodable; an error becomes a failed result with its message.
	Handler func(ctx context.Context, inv Invocation) (any, error)
}

// Invocation is what a handler gets: the call, its parsed arguments and the
// requirement that was allowed.
type Invocation struct {
	Call        Call
	Arguments   map[string]any
	Requirement policy.Requirement
	Context     policy.AccessContext
}

// ReadOnlyHint is the published readOnlyHint: the declared flag, else ReadWrite == read.
func (t *Tool) ReadOnlyHint() bool {
	if t.ReadOnly != nil {
		return *t.ReadOnly
	}
	return t.ReadWrite == Read
}

// Validate applies the registration rules: a valid name, a description of 1–8192
// characters, object schemas that compile, consistent hints, identifiers for
// namespace and source, a ceiling in the tool's own namespace, and the two functions.
func (t *Tool) Validate() error {
	if err := policy.ValidateToolName(t.Name); err != nil {
		return err
	}
	if n := policy.UTF16Len(t.Description); n < 1 || n > 8192 {
		return fmt.Errorf("tool %s: description must be 1–8192 characters, has %d", t.Name, n)
	}
	if _, err := policy.NormalizeIdentifier("namespace", t.Namespace); err != nil {
		return fmt.Errorf("tool %s: %w", t.Name, err)
	}
	if _, err := policy.NormalizeIdentifier("source", t.Source); err != nil {
		return fmt.Errorf("tool %s: %w", t.Name, err)
	}
	if t.ReadWrite != Read && t.ReadWrite != Write {
		return fmt.Errorf("tool %s: readWrite must be %q or %q", t.Name, Read, Write)
	}
	if t.ReadWrite == Read && t.Destructive != nil && *t.Destructive {
		return fmt.Errorf("tool %s: a read tool may not be destructive", t.Name)
	}
	if t.ReadWrite == Write && t.ReadOnly != nil && *t.ReadOnly {
		return fmt.Errorf("tool %s: a write tool may not be read-only", t.Name)
	}
	if _, err := compileSchema(t.InputSchema); err != nil {
		return fmt.Errorf("tool %s: inputSchema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if _, err := compileSchema(t.OutputSchema); err != nil {
			return fmt.Errorf("tool %s: outputSchema: %w", t.Name, err)
		}
	}
	if err := t.Ceiling.Validate(); err != nil {
		return fmt.Errorf("tool %s: ceiling.%w", t.Name, err)
	}
	if t.Ceiling.Resource.Namespace != t.Namespace {
		return fmt.Errorf("tool %s: ceiling namespace %q differs from the tool's namespace %q", t.Name, t.Ceiling.Resource.Namespace, t.Namespace)
	}
	if t.Requirement == nil || t.Handler == nil {
		return fmt.Errorf("tool %s: requirement resolver and handler are required", t.Name)
	}
	return nil
}

// compileSchema checks that raw is a JSON object schema and resolves it for validation.
func compileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("missing")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("type must be \"object\", got %q", s.Type)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("resolving: %w", err)
	}
	return r, nil
}
