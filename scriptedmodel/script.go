package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
)

// Script is what the model does in a turn: the steps in order, then the final text.
type Script struct {
	Steps []Step `json:"steps"`
	Final string `json:"final"`
}

// Step is one tool call the model makes.
type Step struct {
	// Tool is the canonical catalogue name (files.read), or, when Local is set, the
	// harness's own tool name exactly as the harness spells it (Bash).
	Tool string `json:"tool"`
	// Arguments is the call's JSON object ({} when the script leaves it out).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Local asks for a harness-local tool by its exact name instead of a catalogue
	// tool; see the package documentation.
	Local bool `json:"local,omitempty"`
}

// maxToolName bounds a step's tool name; catalogue names are far shorter, and model
// APIs cap tool names at 64-128 characters.
const maxToolName = 128

// ParseScript reads a script strictly: unknown or duplicate keys, keys in the wrong
// case, trailing data, an empty tool name, non-object arguments and an empty final
// text are refused. A typo in a script would otherwise silently change the turn.
func ParseScript(data []byte) (Script, error) {
	top, err := strictObject(data, "script", "steps", "final")
	if err != nil {
		return Script{}, err
	}
	var sc Script
	if raw, ok := top["steps"]; ok && !isNull(raw) {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return Script{}, fmt.Errorf("script: steps must be an array: %w", err)
		}
		for i, item := range items {
			st, err := parseStep(item)
			if err != nil {
				return Script{}, fmt.Errorf("script: step %d: %w", i, err)
			}
			sc.Steps = append(sc.Steps, st)
		}
	}
	raw, ok := top["final"]
	if !ok {
		return Script{}, errors.New("script: final is required")
	}
	if err := json.Unmarshal(raw, &sc.Final); err != nil {
		return Script{}, fmt.Errorf("script: final must be a string: %w", err)
	}
	if err := sc.Validate(); err != nil {
		return Script{}, err
	}
	return sc, nil
}

func parseStep(data []byte) (Step, error) {
	obj, err := strictObject(data, "step", "tool", "arguments", "local")
	if err != nil {
		return Step{}, err
	}
	var st Step
	raw, ok := obj["tool"]
	if !ok {
		return Step{}, errors.New("tool is required")
	}
	if err := json.Unmarshal(raw, &st.Tool); err != nil {
		return Step{}, fmt.Errorf("tool must be a string: %w", err)
	}
	if raw, ok := obj["local"]; ok {
		if err := json.Unmarshal(raw, &st.Local); err != nil {
			return Step{}, fmt.Errorf("local must be a boolean: %w", err)
		}
	}
	st.Arguments = obj["arguments"]
	return st, nil
}

// Validate checks a script built in code the way ParseScript checks a parsed one,
// and normalises each step's arguments to compact JSON ({} when absent).
func (sc *Script) Validate() error {
	if sc.Final == "" {
		return errors.New("script: final must be a non-empty text")
	}
	for i := range sc.Steps {
		st := &sc.Steps[i]
		if err := checkToolName(st.Tool); err != nil {
			return fmt.Errorf("script: step %d: %w", i, err)
		}
		args, err := normalizeArgs(st.Arguments)
		if err != nil {
			return fmt.Errorf("script: step %d (%s): %w", i, st.Tool, err)
		}
		st.Arguments = args
	}
	return nil
}

func checkToolName(name string) error {
	if name == "" {
		return errors.New("tool must not be empty")
	}
	if len(name) > maxToolName {
		return fmt.Errorf("tool name longer than %d bytes", maxToolName)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("tool %q: names have no spaces or control characters", name)
		}
	}
	return nil
}

func normalizeArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return buf.Bytes(), nil
}

// DemoScript is the built-in script used when none is given: list the workspace
// root, read README.md, then summarise.
func DemoScript() Script {
	return Script{
		Steps: []Step{
			{Tool: "files.list", Arguments: json.RawMessage(`{"path":[]}`)},
			{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)},
		},
		Final: "Scripted demo done: I listed the workspace root and read README.md through the sharedos bridge.",
	}
}

// strictObject decodes one JSON object whose keys must be among allowed, exactly
// spelled and not repeated. encoding/json alone would match keys case-insensitively
// and let a repeated key silently win.
func strictObject(data []byte, what string, allowed ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%s: must be a JSON object", what)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%s: malformed object", what)
		}
		known := false
		for _, a := range allowed {
			known = known || a == key
		}
		if !known {
			return nil, fmt.Errorf("%s: unknown key %q (allowed: %v)", what, key, allowed)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s: key %q given twice", what, key)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, key, err)
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the object", what)
	}
	return out, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }
