package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/sharedos/sharedos-run/policy"
)

// MaxCatalogTools is the most tools one turn's catalogue may hold.
const MaxCatalogTools = 512

// GrantSource is the trusted origin of grants. A source that cannot answer makes
// every call fail closed with authority_unavailable.
type GrantSource interface {
	Grants(ctx context.Context) ([]policy.Grant, error)
}

// StaticGrants is a GrantSource loaded once (from a file, for a turn).
type StaticGrants []policy.Grant

// Grants returns the grants.
func (s StaticGrants) Grants(context.Context) ([]policy.Grant, error) { return s, nil }

// Provider contributes tools for one context, for instance a brokered MCP server.
// Its tools join an ephemeral registry for the turn; the shared registry never changes.
type Provider interface {
	Name() string
	Tools(ctx context.Context, ac policy.AccessContext) ([]Tool, error)
}

// Config is what a kernel needs.
type Config struct {
	Tools      []Tool
	Providers  []Provider
	Grants     GrantSource
	Namespaces policy.NamespaceStore
	// HostDeny names tools the host refuses whatever the grants say: an exact name,
	// or "<namespace>.*" for a whole namespace.
	HostDeny []string
	// Clock gives the instant of discovery and of calls; time.Now when nil.
	Clock func() time.Time
}

// Kernel decides and runs calls. It is safe for concurrent use; grant uses are
// counted across all of its turns.
type Kernel struct {
	cfg   Config
	base  map[string]*registered
	clock func() time.Time
	uses  *usageLedger
}

// registered is a validated tool with its compiled schemas.
type registered struct {
	tool   *Tool
	input  *jsonschema.Resolved
	output *jsonschema.Resolved
}

func register(t Tool) (*registered, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	r := &registered{tool: &t}
	r.input, _ = compileSchema(t.InputSchema)
	if t.OutputSchema != nil {
		r.output, _ = compileSchema(t.OutputSchema)
	}
	return r, nil
}

// New validates the tools and builds a kernel.
func New(cfg Config) (*Kernel, error) {
	if cfg.Grants == nil {
		return nil, errors.New("kernel: a grant source is required")
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("kernel: a namespace store is required")
	}
	k := &Kernel{cfg: cfg, base: map[string]*registered{}, clock: cfg.Clock, uses: newUsageLedger()}
	if k.clock == nil {
		k.clock = time.Now
	}
	for _, t := range cfg.Tools {
		r, err := register(t)
		if err != nil {
			return nil, fmt.Errorf("registering tools: %w", err)
		}
		if _, dup := k.base[t.Name]; dup {
			return nil, fmt.Errorf("registering tools: %s is registered twice", t.Name)
		}
		k.base[t.Name] = r
	}
	if len(k.base) > MaxCatalogTools {
		return nil, fmt.Errorf("registering tools: %d tools; at most %d", len(k.base), MaxCatalogTools)
	}
	return k, nil
}

// Now is the kernel's clock.
func (k *Kernel) Now() time.Time { return k.clock() }

// Budgets bound one turn. Zero means unlimited.
type Budgets struct {
	MaxToolCalls int `json:"maxToolCalls,omitempty"`
}

// Turn is one turn's view of the kernel: the context, the ephemeral registry with
// the providers' tools merged in, and the budgets.
type Turn struct {
	k           *Kernel
	ac          policy.AccessContext
	tools       map[string]*registered // built by BeginTurn, read-only after
	published   atomic.Pointer[map[string]*registered]
	providerErr error
	budgets     Budgets
	calls       atomic.Int64
	draining    atomic.Bool
}

// BeginTurn resolves the registry for a context. A provider that fails does not stop
// the turn: its tools are missing, and a call to a name the turn does not know is
// then answered tool_catalog_unavailable rather than tool_unavailable, since the
// tool may well exist. Duplicate names across providers are an error.
func (k *Kernel) BeginTurn(ctx context.Context, ac policy.AccessContext, budgets Budgets) (*Turn, error) {
	if err := ac.Validate(); err != nil {
		return nil, fmt.Errorf("beginning turn: %w", err)
	}
	if budgets.MaxToolCalls < 0 {
		return nil, fmt.Errorf("beginning turn: maxToolCalls must not be negative")
	}
	t := &Turn{k: k, ac: ac, tools: make(map[string]*registered, len(k.base)), budgets: budgets}
	for name, r := range k.base {
		t.tools[name] = r
	}
	var providerErrs []error
	for _, p := range k.cfg.Providers {
		tools, err := p.Tools(ctx, ac)
		if err != nil {
			providerErrs = append(providerErrs, fmt.Errorf("provider %s: %w", p.Name(), err))
			continue
		}
		for _, tool := range tools {
			r, err := register(tool)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name(), err)
			}
			if _, dup := t.tools[tool.Name]; dup {
				return nil, fmt.Errorf("provider %s: tool %s is already registered", p.Name(), tool.Name)
			}
			t.tools[tool.Name] = r
		}
	}
	if len(t.tools) > MaxCatalogTools {
		return nil, fmt.Errorf("beginning turn: %d tools; at most %d", len(t.tools), MaxCatalogTools)
	}
	t.providerErr = errors.Join(providerErrs...)
	enabled, err := k.cfg.Namespaces.Enabled(ctx)
	if err != nil {
		return nil, fmt.Errorf("beginning turn: %w", err)
	}
	t.ac.EnabledToolNamespaces = enabled
	return t, nil
}

// Context is the turn's access context (with the namespaces enabled at its start).
func (t *Turn) Context() policy.AccessContext { return t.ac }

// ProviderError is the joined error of providers that failed at the turn's start.
func (t *Turn) ProviderError() error { return t.providerErr }

// Tool looks a tool up in the turn's registry.
func (t *Turn) Tool(name string) (*Tool, bool) {
	r, ok := t.registry()[name]
	if !ok {
		return nil, false
	}
	return r.tool, true
}

// Publish fixes the turn's registry to the named tools, the catalogue the turn
// published: a tool outside it is unavailable for the rest of the turn, even if a
// grant or a namespace switched on later would allow it. Names not registered are
// ignored.
func (t *Turn) Publish(names []string) {
	fixed := make(map[string]*registered, len(names))
	for _, n := range names {
		if r, ok := t.tools[n]; ok {
			fixed[n] = r
		}
	}
	t.published.Store(&fixed)
}

// registry is the turn's current registry: the published set once fixed.
func (t *Turn) registry() map[string]*registered {
	if p := t.published.Load(); p != nil {
		return *p
	}
	return t.tools
}

// Drain makes every later call answer turn_draining; calls already running finish.
func (t *Turn) Drain() { t.draining.Store(true) }

// Calls is how many calls counted against the turn's budget.
func (t *Turn) Calls() int64 { return t.calls.Load() }

func (k *Kernel) hostDenies(name string) bool {
	for _, d := range k.cfg.HostDeny {
		if d == name {
			return true
		}
		if ns, ok := strings.CutSuffix(d, ".*"); ok && strings.HasPrefix(name, ns+".") {
			return true
		}
	}
	return false
}

// Discover returns the tools the context may see now, sorted by name: registered,
// namespace enabled, not refused by the host, and some applicable grant with uses
// left has a capability that intersects the tool's ceiling. It consumes nothing.
func (t *Turn) Discover(ctx context.Context) ([]*Tool, error) {
	enabled, err := t.k.cfg.Namespaces.Enabled(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	grants, err := t.k.cfg.Grants.Grants(ctx)
	if err != nil {
		return nil, fmt.Errorf("discovery: grants: %w", err)
	}
	now := t.k.clock()
	var live []policy.Grant
	for _, g := range grants {
		if g.AppliesTo(t.ac, now) && t.k.uses.left(g) {
			live = append(live, g)
		}
	}
	var out []*Tool
	for _, r := range t.registry() {
		tool := r.tool
		if !slices.Contains(enabled, tool.Namespace) || t.k.hostDenies(tool.Name) {
			continue
		}
		ceiling := t.ceiling(tool)
		if slices.ContainsFunc(live, func(g policy.Grant) bool {
			return slices.ContainsFunc(g.Capabilities, func(c policy.Capability) bool { return c.Intersects(ceiling) })
		}) {
			out = append(out, tool)
		}
	}
	slices.SortFunc(out, func(a, b *Tool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ceiling is the tool's declared ceiling owned by the context's owner: resources in a
// turn belong to its owner, so requirements and ceilings both carry it.
func (t *Turn) ceiling(tool *Tool) policy.Capability {
	c := tool.Ceiling
	c.Resource.Owner = t.ac.Owner
	return c
}

// Call decides a call afresh and, when it is allowed, runs the tool.
func (t *Turn) Call(ctx context.Context, c Call) (res Result) {
	res.Started = t.k.clock()
	defer func() { res.Finished = t.k.clock() }()
	if t.draining.Load() {
		return denied(CodeTurnDraining, "the turn is closing; no further calls are accepted")
	}
	if strings.TrimSpace(c.ID) == "" || c.Tool == "" {
		return denied(CodeInvalidRequest, "a tool call needs an id and a tool name")
	}
	args, err := decodeArguments(c.Arguments)
	if err != nil {
		return denied(CodeInvalidRequest, err.Error())
	}
	if msg := crossesContext(args, t.ac); msg != "" {
		return denied(CodeInvalidRequest, msg)
	}
	if n := t.calls.Add(1); t.budgets.MaxToolCalls > 0 && n > int64(t.budgets.MaxToolCalls) {
		return denied(CodeToolCallLimitExceeded, fmt.Sprintf("this turn allows at most %d tool calls", t.budgets.MaxToolCalls))
	}
	r, ok := t.registry()[c.Tool]
	if !ok {
		if t.providerErr != nil {
			return failed(CodeToolCatalogUnavailable, fmt.Sprintf("tool %q is not in the catalogue, and part of the catalogue could not be loaded: %v", c.Tool, t.providerErr))
		}
		return denied(CodeToolUnavailable, fmt.Sprintf("tool %q is not available", c.Tool))
	}
	tool := r.tool
	enabled, err := t.k.cfg.Namespaces.Enabled(ctx)
	if err != nil {
		return denied(CodeAuthorityUnavailable, "namespace settings could not be read: "+err.Error())
	}
	if !slices.Contains(enabled, tool.Namespace) {
		return denied(CodeToolUnavailable, fmt.Sprintf("tool %q is not available: namespace %q is not enabled", c.Tool, tool.Namespace))
	}
	if t.k.hostDenies(tool.Name) {
		return denied(CodeHostPolicyDenied, fmt.Sprintf("the host's policy refuses tool %q", c.Tool))
	}
	if err := r.input.Validate(args); err != nil {
		return failed(CodeInvalidToolArguments, "arguments do not match the tool's input schema: "+err.Error())
	}
	req, err := tool.Requirement(args, t.ac)
	if err != nil {
		return failed(CodeInvalidToolArguments, err.Error())
	}
	req.Resource.Owner = t.ac.Owner
	res.Requirement = &req
	if !t.ceiling(tool).Allows(req) {
		res.Status, res.Code, res.Message = Failed, CodeInvalidToolRequirement,
			fmt.Sprintf("%s on %s is outside what tool %q may touch", req.Action, describe(req.Resource), c.Tool)
		return res
	}
	grants, err := t.k.cfg.Grants.Grants(ctx)
	if err != nil {
		res.Status, res.Code, res.Message = Denied, CodeAuthorityUnavailable, "grants could not be loaded: "+err.Error()
		return res
	}
	at := c.RequestedAt
	if at.IsZero() {
		at = t.k.clock()
	}
	grant, code := t.k.uses.authorize(grants, t.ac, req, at)
	if code != "" {
		res.Status, res.Code = Denied, code
		res.Message = fmt.Sprintf("no grant allows %s on %s", req.Action, describe(req.Resource))
		if code == CodeGrantExhausted {
			res.Message = fmt.Sprintf("every grant that allows %s on %s has been used up", req.Action, describe(req.Resource))
		}
		return res
	}
	res.GrantID = grant
	out, err := runHandler(ctx, tool, Invocation{Call: c, Arguments: args, Requirement: req, Context: t.ac})
	switch {
	case ctx.Err() != nil:
		res.Status, res.Code, res.Message, res.Cancelled = Failed, CodeToolExecutionFailed, "the call was cancelled", true
		return res
	case err != nil:
		res.Status, res.Code, res.Message = Failed, CodeToolExecutionFailed, err.Error()
		var te *ToolError
		res.Retryable = errors.As(err, &te) && te.Retryable
		return res
	}
	encoded, msg := encodeOutput(r, out)
	if msg != "" {
		res.Status, res.Code, res.Message = Failed, CodeInvalidToolResult, msg
		return res
	}
	res.Status, res.Output, res.OutputJSON = Succeeded, out, encoded
	return res
}

// crossesContext refuses arguments that name an owner or a namespace other than
// the turn's: a call acts for its context only, and arguments are never authority.
func crossesContext(args map[string]any, ac policy.AccessContext) string {
	if v, ok := args["owner"]; ok && v != ac.Owner {
		return fmt.Sprintf("the arguments name owner %v; this turn acts for its own owner only", v)
	}
	if v, ok := args["namespaceId"]; ok && v != ac.NamespaceID {
		return fmt.Sprintf("the arguments name namespace %v; this turn acts in its own namespace only", v)
	}
	return ""
}

// decodeArguments parses the call's arguments, which must be a JSON object.
func decodeArguments(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return map[string]any{}, nil
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&args); err != nil || args == nil {
		return nil, errors.New("tool arguments must be a JSON object")
	}
	if dec.More() {
		return nil, errors.New("tool arguments must be a single JSON object")
	}
	return args, nil
}

func runHandler(ctx context.Context, tool *Tool, inv Invocation) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s crashed: %v", tool.Name, p)
		}
	}()
	return tool.Handler(ctx, inv)
}

// encodeOutput encodes the output as JSON (without HTML escaping, as JavaScript
// would) and checks it against the output schema; it returns why the output is
// unacceptable, or "".
func encodeOutput(r *registered, out any) (json.RawMessage, string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, "the tool's output cannot be encoded as JSON: " + err.Error()
	}
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if r.output == nil {
		return data, ""
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, "the tool's output cannot be decoded: " + err.Error()
	}
	if err := r.output.Validate(v); err != nil {
		return nil, "the tool's output does not match its output schema: " + err.Error()
	}
	return data, ""
}

func describe(r policy.Resource) string {
	return r.Namespace + ":/" + strings.Join(r.Path, "/")
}

// usageLedger counts uses of grants with maxUses. A use is reserved under the lock at
// the moment a call is allowed to run, so N concurrent callers on a grant of N uses
// get exactly N allows.
type usageLedger struct {
	mu   sync.Mutex
	used map[string]int
}

func newUsageLedger() *usageLedger { return &usageLedger{used: map[string]int{}} }

func (l *usageLedger) left(g policy.Grant) bool {
	if g.Constraints.MaxUses == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used[g.ID] < *g.Constraints.MaxUses
}

// authorize finds a grant that allows req for the context at instant at and consumes
// one of its uses. Unlimited grants are preferred so that counted uses are spent only
// when nothing else allows the call. It returns the grant id, or a denial code.
func (l *usageLedger) authorize(grants []policy.Grant, ac policy.AccessContext, req policy.Requirement, at time.Time) (string, string) {
	var limited []policy.Grant
	for _, g := range grants {
		if !g.AppliesTo(ac, at) || !slices.ContainsFunc(g.Capabilities, func(c policy.Capability) bool { return c.Allows(req) }) {
			continue
		}
		if g.Constraints.MaxUses == nil {
			return g.ID, ""
		}
		limited = append(limited, g)
	}
	if len(limited) == 0 {
		return "", CodeNoMatchingGrant
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range limited {
		if l.used[g.ID] < *g.Constraints.MaxUses {
			l.used[g.ID]++
			return g.ID, ""
		}
	}
	return "", CodeGrantExhausted
}
