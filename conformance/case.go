// Package conformance runs adversarial cases through every installed harness and
// grades each cell: did the kernel refuse what it must, did the controls succeed, and
// was the harness even given the chance. It owns the case format, the judge, the
// runner (parallel cells, shards) and the artifact SharedOS defines
// (mcp-toolshare-conformance), including merging shard artifacts.
package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// Roles of an attempt.
const (
	RoleControl = "control" // must succeed for the cell to count at all
	RoleAttack  = "attack"  // what the kernel must refuse
	RoleProbe   = "probe"   // recorded and graded, but does not decide the cell
)

// The conformance context: every case's grants are issued by this authority to this
// actor in this namespace (the case file leaves them out).
const (
	ContextNamespace = "conformance"
	ContextActor     = "agent:harness"
	ContextAuthority = "conformance-host"
	ContextPurpose   = "conformance"
)

// ShellTool in an attempt stands for the harness's own shell tool, named as the
// harness names it.
const ShellTool = "$shell"

// Case is one adversarial case: a world, and the attempts the model seat makes in it.
type Case struct {
	ID        string    `json:"id"`
	Invariant string    `json:"invariant"`
	World     World     `json:"world"`
	Attempts  []Attempt `json:"attempts"`
	// Checks are whole-record checks: "record-complete".
	Checks []string `json:"checks,omitempty"`
}

// World is what the turn starts from.
type World struct {
	Files      map[string]string `json:"files"`
	Grants     []CaseGrant       `json:"grants"`
	Namespaces []string          `json:"namespaces"`
	Budgets    kernel.Budgets    `json:"budgets"`
	// Broker adds the brokered "tickets" namespace (a dynamic tool provider).
	Broker bool `json:"broker,omitempty"`
}

// CaseGrant is a grant without the parts the conformance context supplies.
type CaseGrant struct {
	ID           string              `json:"id"`
	Capabilities []policy.Capability `json:"capabilities"`
	Constraints  policy.Constraints  `json:"constraints"`
	IssuedAt     *time.Time          `json:"issuedAt,omitempty"`
}

// Attempt is one call the model seat makes.
type Attempt struct {
	Role      string          `json:"role"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Local asks for the harness's own tool (ShellTool) instead of a catalogue tool.
	Local bool `json:"local,omitempty"`
	// Late makes the call after the turn has closed (the record's late-call knock).
	Late   bool   `json:"late,omitempty"`
	Expect Expect `json:"expect"`
}

// Expect is what the attempt must get.
type Expect struct {
	Statuses    []string `json:"statuses"`
	ReasonCodes []string `json:"reasonCodes,omitempty"`
	// Unlisted: the tool must not be in the catalogue; a harness that cannot route
	// an unlisted tool leaves the attempt not_applicable rather than not_exercised.
	Unlisted bool `json:"unlisted,omitempty"`
	// OffSchema: the arguments break the tool's published input schema; a harness
	// that validates them itself and never sends the call leaves the attempt
	// not_applicable (the model asked; the call could not be issued over MCP).
	OffSchema bool `json:"offSchema,omitempty"`
}

// Grant turns a case grant into a policy grant of the conformance context.
func (g CaseGrant) Grant() policy.Grant {
	issued := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if g.IssuedAt != nil {
		issued = *g.IssuedAt
	}
	return policy.Grant{ID: g.ID, NamespaceID: ContextNamespace, Subject: ContextActor, Issuer: ContextAuthority,
		Capabilities: g.Capabilities, Constraints: g.Constraints, IssuedAt: issued}
}

// Validate checks a case's shape.
func (c Case) Validate() error {
	if c.ID == "" || strings.ContainsAny(c.ID, " /\\") {
		return fmt.Errorf("case id %q: want a simple id", c.ID)
	}
	if c.Invariant == "" {
		return fmt.Errorf("case %s: invariant is required", c.ID)
	}
	var grants []policy.Grant
	for _, g := range c.World.Grants {
		grants = append(grants, g.Grant())
	}
	if err := policy.ValidateGrants(grants); err != nil {
		return fmt.Errorf("case %s: world.%w", c.ID, err)
	}
	for p := range c.World.Files {
		if err := policy.ValidatePath(strings.Split(p, "/")); err != nil {
			return fmt.Errorf("case %s: world.files[%q]: %w", c.ID, p, err)
		}
	}
	if len(c.Attempts) == 0 {
		return fmt.Errorf("case %s: no attempts", c.ID)
	}
	for i, a := range c.Attempts {
		switch a.Role {
		case RoleControl, RoleAttack, RoleProbe:
		default:
			return fmt.Errorf("case %s: attempts[%d].role %q is not control, attack or probe", c.ID, i, a.Role)
		}
		if a.Tool == "" || len(a.Expect.Statuses) == 0 {
			return fmt.Errorf("case %s: attempts[%d] needs a tool and expect.statuses", c.ID, i)
		}
		if a.Local && a.Tool != ShellTool {
			return fmt.Errorf("case %s: attempts[%d]: a local attempt names %s", c.ID, i, ShellTool)
		}
		if len(a.Arguments) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(a.Arguments, &obj); err != nil || obj == nil {
				return fmt.Errorf("case %s: attempts[%d].arguments must be an object", c.ID, i)
			}
		}
	}
	for _, chk := range c.Checks {
		if chk != "record-complete" {
			return fmt.Errorf("case %s: unknown check %q", c.ID, chk)
		}
	}
	return nil
}

// CaseSet is the loaded cases, in id order, with the hash of their canonical JSON.
type CaseSet struct {
	Cases []Case
	Hash  string
}

// LoadCases reads every *.json case in dir, strictly.
func LoadCases(dir string) (CaseSet, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return CaseSet{}, err
	}
	if len(paths) == 0 {
		return CaseSet{}, fmt.Errorf("no cases (*.json) in %s", dir)
	}
	var set CaseSet
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return CaseSet{}, fmt.Errorf("reading case: %w", err)
		}
		var c Case
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return CaseSet{}, fmt.Errorf("case %s: %w", p, err)
		}
		if err := c.Validate(); err != nil {
			return CaseSet{}, fmt.Errorf("%s: %w", p, err)
		}
		if slices.ContainsFunc(set.Cases, func(o Case) bool { return o.ID == c.ID }) {
			return CaseSet{}, fmt.Errorf("%s: case id %s is used twice", p, c.ID)
		}
		set.Cases = append(set.Cases, c)
	}
	sort.Slice(set.Cases, func(i, j int) bool { return set.Cases[i].ID < set.Cases[j].ID })
	set.Hash, err = canonjson.HashValue(set.Cases)
	if err != nil {
		return CaseSet{}, fmt.Errorf("hashing the case set: %w", err)
	}
	return set, nil
}

// Select picks cases by id (all when ids is empty), or the first limit of them.
func (s CaseSet) Select(ids []string, limit int) ([]Case, error) {
	if len(ids) > 0 {
		var out []Case
		for _, id := range ids {
			i := slices.IndexFunc(s.Cases, func(c Case) bool { return c.ID == id })
			if i < 0 {
				return nil, fmt.Errorf("unknown case %q (known: %s)", id, strings.Join(s.IDs(), ", "))
			}
			out = append(out, s.Cases[i])
		}
		return out, nil
	}
	if limit < 0 || limit > len(s.Cases) {
		limit = len(s.Cases)
	}
	return s.Cases[:limit], nil
}

// IDs lists the case ids.
func (s CaseSet) IDs() []string {
	var ids []string
	for _, c := range s.Cases {
		ids = append(ids, c.ID)
	}
	return ids
}
