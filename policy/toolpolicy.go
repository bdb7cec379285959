package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/sharedos/sharedos-run/canonjson"
)

// ToolPolicy v1 declares a harness's whole tool surface: the managed MCP servers it
// reaches through the bridge, the harness's own local tools, and any externally
// connected servers. Under "strict" nothing external is allowed and every local tool
// must be named.
type ToolPolicy struct {
	Mode           PolicyMode `json:"mode"`
	ManagedMCP     []string   `json:"managedMcp"`
	HarnessLocal   []string   `json:"harnessLocal"`
	ExternalDirect []string   `json:"externalDirect"`
}

// PolicyMode is strict or hybrid.
type PolicyMode string

// Policy modes.
const (
	ModeStrict PolicyMode = "strict"
	ModeHybrid PolicyMode = "hybrid"
)

// ToolClass says where a tool comes from.
type ToolClass string

// Tool classes.
const (
	ClassManaged        ToolClass = "managed"
	ClassHarnessLocal   ToolClass = "harness_local"
	ClassExternalDirect ToolClass = "external_direct"
)

// DefaultManagedMCP is the managed server name when a policy names none.
const DefaultManagedMCP = "sharedos"

// Policy list limits.
const (
	maxManagedMCP     = 64
	maxHarnessLocal   = 256
	maxExternalDirect = 64
)

// toolPolicyInput distinguishes absent fields (nil) from empty ones for defaults.
type toolPolicyInput struct {
	Mode           *PolicyMode `json:"mode"`
	ManagedMCP     []string    `json:"managedMcp"`
	HarnessLocal   []string    `json:"harnessLocal"`
	ExternalDirect []string    `json:"externalDirect"`
}

// ErrStrictExternal is the refusal SharedOS gives for a strict policy with external tools.
var ErrStrictExternal = errors.New("a strict tool policy cannot declare externally connected tools")

// ParseToolPolicy reads a policy, refusing unknown keys, applies the defaults and validates it.
func ParseToolPolicy(data []byte) (ToolPolicy, error) {
	var in toolPolicyInput
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return ToolPolicy{}, fmt.Errorf("decoding tool policy: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ToolPolicy{}, fmt.Errorf("decoding tool policy: trailing data after the object")
	}
	return in.resolve()
}

// UnmarshalJSON lets a ToolPolicy sit inside a larger document with the same rules.
func (p *ToolPolicy) UnmarshalJSON(data []byte) error {
	parsed, err := ParseToolPolicy(data)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

func (in toolPolicyInput) resolve() (ToolPolicy, error) {
	p := ToolPolicy{
		ManagedMCP:     in.ManagedMCP,
		HarnessLocal:   in.HarnessLocal,
		ExternalDirect: in.ExternalDirect,
	}
	if p.ManagedMCP == nil {
		p.ManagedMCP = []string{DefaultManagedMCP}
	}
	if p.HarnessLocal == nil {
		p.HarnessLocal = []string{}
	}
	if p.ExternalDirect == nil {
		p.ExternalDirect = []string{}
	}
	switch {
	case in.Mode != nil:
		p.Mode = *in.Mode
	case len(p.ExternalDirect) == 0:
		p.Mode = ModeStrict
	default:
		p.Mode = ModeHybrid
	}
	return p, p.Validate()
}

// DefaultToolPolicy is strict, managed "sharedos" only, no local tools.
func DefaultToolPolicy() ToolPolicy {
	p, _ := toolPolicyInput{}.resolve()
	return p
}

// Validate applies the v1 rules, naming the field that breaks one.
func (p ToolPolicy) Validate() error {
	if p.Mode != ModeStrict && p.Mode != ModeHybrid {
		return fmt.Errorf("mode: %q is not \"strict\" or \"hybrid\"", p.Mode)
	}
	if len(p.ManagedMCP) == 0 {
		return fmt.Errorf("managedMcp: at least one managed MCP server is required")
	}
	if err := checkList("managedMcp", p.ManagedMCP, maxManagedMCP, func(field, v string) error {
		_, err := NormalizeIdentifier(field, v)
		return err
	}); err != nil {
		return err
	}
	if err := checkList("harnessLocal", p.HarnessLocal, maxHarnessLocal, func(field, v string) error {
		if err := ValidateToolName(v); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := checkList("externalDirect", p.ExternalDirect, maxExternalDirect, func(field, v string) error {
		_, err := NormalizeIdentifier(field, v)
		return err
	}); err != nil {
		return err
	}
	if p.Mode == ModeStrict && len(p.ExternalDirect) > 0 {
		return fmt.Errorf("externalDirect: %w", ErrStrictExternal)
	}
	return nil
}

func checkList(field string, values []string, max int, check func(field, v string) error) error {
	if len(values) > max {
		return fmt.Errorf("%s: %d entries; at most %d are allowed", field, len(values), max)
	}
	for i, v := range values {
		name := fmt.Sprintf("%s[%d]", field, i)
		if err := check(name, v); err != nil {
			return err
		}
		if slices.Index(values, v) != i {
			return fmt.Errorf("%s: %q is listed twice", name, v)
		}
	}
	return nil
}

// Hash is policyHash: SHA-256 hex of the canonical JSON of the policy.
func (p ToolPolicy) Hash() (string, error) {
	return canonjson.HashValue(p)
}

// Classify says which class a tool the harness exposes belongs to, given the MCP
// server it came from ("" for a tool of the harness's own).
func (p ToolPolicy) Classify(server, tool string) (ToolClass, bool) {
	switch {
	case server == "" && slices.Contains(p.HarnessLocal, tool):
		return ClassHarnessLocal, true
	case server != "" && slices.Contains(p.ManagedMCP, server):
		return ClassManaged, true
	case server != "" && slices.Contains(p.ExternalDirect, server):
		return ClassExternalDirect, true
	}
	return "", false
}
