package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// AccessContext says who is acting, under whose authority, for what purpose, at what
// instant. It carries no grants: authority comes only from a trusted grant source.
type AccessContext struct {
	NamespaceID           string
	Actor                 Actor
	Authority             string
	Owner                 string
	Purpose               string
	TraceID               string
	EnabledToolNamespaces []string
	Now                   time.Time
}

// Validate checks the identifiers a context must carry.
func (ac AccessContext) Validate() error {
	if _, err := NormalizeIdentifier("context.namespaceId", ac.NamespaceID); err != nil {
		return err
	}
	if _, err := CanonicalActor(ac.Actor); err != nil {
		return fmt.Errorf("context.actor: %w", err)
	}
	if _, err := NormalizeIdentifier("context.authority", ac.Authority); err != nil {
		return err
	}
	if _, err := NormalizeIdentifier("context.purpose", ac.Purpose); err != nil {
		return err
	}
	if ac.Owner != "" {
		if _, err := NormalizeIdentifier("context.owner", ac.Owner); err != nil {
			return err
		}
	}
	return nil
}

// Resource names something a capability can cover: a namespace, a path of segments
// inside it, and optionally its owner.
type Resource struct {
	Namespace string   `json:"namespace"`
	Path      []string `json:"path"`
	Owner     string   `json:"owner,omitempty"`
}

// Scope says whether a capability covers its path only or the path and everything below it.
type Scope string

// Capability scopes.
const (
	ScopeExact       Scope = "exact"
	ScopeDescendants Scope = "descendants"
)

// Capability allows actions on a resource.
type Capability struct {
	Resource Resource `json:"resource"`
	Actions  []string `json:"actions"`
	Scope    Scope    `json:"scope"`
}

// Constraints narrow when and how often a grant applies.
type Constraints struct {
	Purposes  []string   `json:"purposes,omitempty"`
	NotBefore *time.Time `json:"notBefore,omitempty"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	MaxUses   *int       `json:"maxUses,omitempty"`
}

// Grant is issued by an authority to a subject within a namespace.
type Grant struct {
	ID           string       `json:"id"`
	NamespaceID  string       `json:"namespaceId"`
	Subject      string       `json:"subject"`
	Issuer       string       `json:"issuer"`
	Capabilities []Capability `json:"capabilities"`
	Constraints  Constraints  `json:"constraints"`
	IssuedAt     time.Time    `json:"issuedAt"`
	RevokedAt    *time.Time   `json:"revokedAt,omitempty"`
}

// Requirement is what one call needs: an action on a resource.
type Requirement struct {
	Resource Resource `json:"resource"`
	Action   string   `json:"action"`
}

// ActionAny in a capability's actions allows every action.
const ActionAny = "*"

// Validate checks a grant's shape; the field named in the error is relative to the grant.
func (g Grant) Validate() error {
	if _, err := NormalizeIdentifier("id", g.ID); err != nil {
		return err
	}
	if _, err := NormalizeIdentifier("namespaceId", g.NamespaceID); err != nil {
		return err
	}
	if _, err := ParseActor(g.Subject); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	if _, err := NormalizeIdentifier("issuer", g.Issuer); err != nil {
		return err
	}
	if len(g.Capabilities) == 0 {
		return fmt.Errorf("capabilities: at least one capability is required")
	}
	for i, c := range g.Capabilities {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("capabilities[%d].%w", i, err)
		}
	}
	if g.IssuedAt.IsZero() {
		return fmt.Errorf("issuedAt: required (RFC 3339)")
	}
	k := g.Constraints
	if k.MaxUses != nil && *k.MaxUses < 1 {
		return fmt.Errorf("constraints.maxUses: must be at least 1, got %d", *k.MaxUses)
	}
	if k.NotBefore != nil && k.ExpiresAt != nil && !k.ExpiresAt.After(*k.NotBefore) {
		return fmt.Errorf("constraints.expiresAt: must be after notBefore")
	}
	for i, p := range k.Purposes {
		if _, err := NormalizeIdentifier(fmt.Sprintf("constraints.purposes[%d]", i), p); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a capability's shape.
func (c Capability) Validate() error {
	if _, err := NormalizeIdentifier("resource.namespace", c.Resource.Namespace); err != nil {
		return err
	}
	if c.Resource.Path == nil {
		return fmt.Errorf("resource.path: required (an array of segments; [] is the namespace root)")
	}
	if err := ValidatePath(c.Resource.Path); err != nil {
		return fmt.Errorf("resource.path: %w", err)
	}
	if len(c.Actions) == 0 {
		return fmt.Errorf("actions: at least one action is required")
	}
	for i, a := range c.Actions {
		if a == "" {
			return fmt.Errorf("actions[%d]: empty", i)
		}
	}
	if c.Scope != ScopeExact && c.Scope != ScopeDescendants {
		return fmt.Errorf("scope: %q is not \"exact\" or \"descendants\"", c.Scope)
	}
	return nil
}

// AppliesTo reports whether the grant speaks for this context at instant t: issuer is
// the context's authority, subject its actor, same namespace, not revoked, inside the
// time window, and the purpose allowed. Uses are the caller's to count.
func (g Grant) AppliesTo(ac AccessContext, t time.Time) bool {
	if g.Issuer != ac.Authority || g.Subject != ac.Actor.String() || g.NamespaceID != ac.NamespaceID {
		return false
	}
	if g.RevokedAt != nil && !t.Before(*g.RevokedAt) {
		return false
	}
	k := g.Constraints
	if k.NotBefore != nil && t.Before(*k.NotBefore) {
		return false
	}
	if k.ExpiresAt != nil && !t.Before(*k.ExpiresAt) {
		return false
	}
	if len(k.Purposes) > 0 && !slices.Contains(k.Purposes, ac.Purpose) {
		return false
	}
	return true
}

func (c Capability) allowsAction(action string) bool {
	return slices.Contains(c.Actions, ActionAny) || slices.Contains(c.Actions, action)
}

// Allows reports whether the capability covers the requirement: same namespace and
// owner, the action listed (or "*"), and the path equal (exact) or below (descendants).
func (c Capability) Allows(req Requirement) bool {
	if c.Resource.Namespace != req.Resource.Namespace || c.Resource.Owner != req.Resource.Owner {
		return false
	}
	if !c.allowsAction(req.Action) {
		return false
	}
	if c.Scope == ScopeExact {
		return slices.Equal(c.Resource.Path, req.Resource.Path)
	}
	return isPrefix(c.Resource.Path, req.Resource.Path)
}

// Intersects reports whether some requirement could satisfy both the capability and
// the ceiling. Discovery uses it: a tool is shown when a grant could ever allow it.
func (c Capability) Intersects(ceiling Capability) bool {
	if c.Resource.Namespace != ceiling.Resource.Namespace || c.Resource.Owner != ceiling.Resource.Owner {
		return false
	}
	actionOverlap := slices.Contains(c.Actions, ActionAny) || slices.Contains(ceiling.Actions, ActionAny) ||
		slices.ContainsFunc(ceiling.Actions, func(a string) bool { return slices.Contains(c.Actions, a) })
	if !actionOverlap {
		return false
	}
	p, q := c.Resource.Path, ceiling.Resource.Path
	switch {
	case slices.Equal(p, q):
		return true
	case c.Scope == ScopeDescendants && isPrefix(p, q):
		return true
	case ceiling.Scope == ScopeDescendants && isPrefix(q, p):
		return true
	}
	return false
}

// isPrefix reports whether prefix is a segment-wise prefix of path (equal counts).
func isPrefix(prefix, path []string) bool {
	return len(prefix) <= len(path) && slices.Equal(prefix, path[:len(prefix)])
}

// GrantFile is the on-disk form of a grant source: {"grants":[...]}.
type GrantFile struct {
	Grants []Grant `json:"grants"`
}

// DecodeGrants parses and validates grants from JSON, refusing unknown fields.
func DecodeGrants(data []byte) ([]Grant, error) {
	var f GrantFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding grants: %w", err)
	}
	if err := ValidateGrants(f.Grants); err != nil {
		return nil, err
	}
	return f.Grants, nil
}

// ValidateGrants checks each grant and that ids are unique.
func ValidateGrants(grants []Grant) error {
	seen := map[string]bool{}
	for i, g := range grants {
		if err := g.Validate(); err != nil {
			return fmt.Errorf("grants[%d].%w", i, err)
		}
		if seen[g.ID] {
			return fmt.Errorf("grants[%d].id: %q is used by an earlier grant", i, g.ID)
		}
		seen[g.ID] = true
	}
	return nil
}

// LoadGrants reads a grant file.
func LoadGrants(path string) ([]Grant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading grants: %w", err)
	}
	grants, err := DecodeGrants(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return grants, nil
}
