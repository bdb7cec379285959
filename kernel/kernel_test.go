package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/policy"
)

var t0 = time.Date(2026, 8, 23, 0, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

const pathSchema = `{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"array","items":{"type":"string"},"maxItems":64},"mode":{"enum":["ok","fail","panic","badout","block","retry"]}}}`

// pathRequirement derives files-like requirements: action on demo:/<path>.
func pathRequirement(action string) func(map[string]any, policy.AccessContext) (policy.Requirement, error) {
	return func(args map[string]any, _ policy.AccessContext) (policy.Requirement, error) {
		raw, _ := args["path"].([]any)
		path := make([]string, 0, len(raw))
		for _, s := range raw {
			path = append(path, s.(string))
		}
		if err := policy.ValidatePath(path); err != nil {
			return policy.Requirement{}, err
		}
		return policy.Requirement{Resource: policy.Resource{Namespace: "demo", Path: path}, Action: action}, nil
	}
}

type harness struct {
	k        *Kernel
	ns       *policy.MemoryNamespaces
	ran      atomic.Int64
	block    chan struct{}
	started  chan struct{}
	grantErr error
}

func (h *harness) Grants(context.Context) ([]policy.Grant, error) { return nil, h.grantErr }

func demoTools(h *harness) []Tool {
	handler := func(ctx context.Context, inv Invocation) (any, error) {
		h.ran.Add(1)
		switch inv.Arguments["mode"] {
		case "fail":
			return nil, errors.New("disk on fire")
		case "retry":
			return nil, &ToolError{Message: "version conflict", Retryable: true}
		case "panic":
			panic("boom")
		case "badout":
			return math.Inf(1), nil
		case "block":
			close(h.started)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return map[string]any{"path": inv.Requirement.Resource.Path}, nil
	}
	ceiling := func(action string, path ...string) policy.Capability {
		return policy.Capability{Resource: policy.Resource{Namespace: "demo", Path: append([]string{}, path...)}, Actions: []string{action}, Scope: policy.ScopeDescendants}
	}
	return []Tool{
		{Name: "demo.read", Description: "read", InputSchema: json.RawMessage(pathSchema), Namespace: "demo", Source: "sharedos", ReadWrite: Read,
			Ceiling: ceiling("read"), Requirement: pathRequirement("read"), Handler: handler},
		{Name: "demo.write", Description: "write", InputSchema: json.RawMessage(pathSchema), Namespace: "demo", Source: "sharedos", ReadWrite: Write,
			Ceiling: ceiling("write", "Work"), Requirement: pathRequirement("write"), Handler: handler},
		{Name: "demo.typed", Description: "typed output", InputSchema: json.RawMessage(pathSchema), Namespace: "demo", Source: "sharedos", ReadWrite: Read,
			OutputSchema: json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}`),
			Ceiling:      ceiling("read"), Requirement: pathRequirement("read"), Handler: handler},
		{Name: "other.read", Description: "other namespace", InputSchema: json.RawMessage(pathSchema), Namespace: "other", Source: "sharedos", ReadWrite: Read,
			Ceiling: policy.Capability{Resource: policy.Resource{Namespace: "other", Path: []string{}}, Actions: []string{"read"}, Scope: policy.ScopeDescendants},
			Requirement: func(map[string]any, policy.AccessContext) (policy.Requirement, error) {
				return policy.Requirement{Resource: policy.Resource{Namespace: "other", Path: []string{}}, Action: "read"}, nil
			}, Handler: handler},
	}
}

func testContext() policy.AccessContext {
	return policy.AccessContext{NamespaceID: "world-1", Actor: policy.Actor{Kind: policy.ActorAgent, ID: "bob"}, Authority: "host", Purpose: "test"}
}

func grant(id string, actions []string, scope policy.Scope, path ...string) policy.Grant {
	return policy.Grant{ID: id, NamespaceID: "world-1", Subject: "agent:bob", Issuer: "host", IssuedAt: t0.Add(-time.Hour),
		Capabilities: []policy.Capability{{Resource: policy.Resource{Namespace: "demo", Path: append([]string{}, path...)}, Actions: actions, Scope: scope}}}
}

type setup struct {
	grants     []policy.Grant
	grantErr   error
	enabled    []string
	hostDeny   []string
	budgets    Budgets
	providers  []Provider
	clock      time.Time
	turnAction func(*Turn, *harness)
}

func newTurn(t *testing.T, s setup) (*Turn, *harness) {
	t.Helper()
	h := &harness{block: make(chan struct{}), started: make(chan struct{})}
	h.ns = policy.NewMemoryNamespaces(s.enabled)
	var src GrantSource = StaticGrants(s.grants)
	if s.grantErr != nil {
		h.grantErr = s.grantErr
		src = h
	}
	clock := s.clock
	if clock.IsZero() {
		clock = t0
	}
	k, err := New(Config{Tools: demoTools(h), Providers: s.providers, Grants: src, Namespaces: h.ns, HostDeny: s.hostDeny, Clock: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	h.k = k
	turn, err := k.BeginTurn(context.Background(), testContext(), s.budgets)
	if err != nil {
		t.Fatal(err)
	}
	if s.turnAction != nil {
		s.turnAction(turn, h)
	}
	return turn, h
}

func call(tool, args string) Call {
	return Call{ID: "c1", Tool: tool, Arguments: json.RawMessage(args)}
}

func TestCallCodes(t *testing.T) {
	all := []policy.Grant{grant("g-all", []string{"*"}, policy.ScopeDescendants)}
	cases := []struct {
		name    string
		setup   setup
		call    Call
		status  Status
		code    string
		ran     bool
		retry   bool
		grantID string
	}{
		{name: "allowed", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":["Work","a.txt"]}`), status: Succeeded, ran: true, grantID: "g-all"},
		{name: "arguments default to {} and then fail the schema", setup: setup{grants: all, enabled: []string{"demo"}}, call: Call{ID: "c", Tool: "demo.read"}, status: Failed, code: CodeInvalidToolArguments},
		{name: "unknown tool", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.nope", `{}`), status: Denied, code: CodeToolUnavailable},
		{name: "bad tool name still reaches the kernel", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("../../etc", `{}`), status: Denied, code: CodeToolUnavailable},
		{name: "empty tool name", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("", `{}`), status: Denied, code: CodeInvalidRequest},
		{name: "missing call id", setup: setup{grants: all, enabled: []string{"demo"}}, call: Call{Tool: "demo.read", Arguments: json.RawMessage(`{"path":[]}`)}, status: Denied, code: CodeInvalidRequest},
		{name: "arguments naming another owner", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"owner":"mallory"}`), status: Denied, code: CodeInvalidRequest},
		{name: "arguments naming another namespace", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"namespaceId":"world-2"}`), status: Denied, code: CodeInvalidRequest},
		{name: "arguments not an object", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `[1,2]`), status: Denied, code: CodeInvalidRequest},
		{name: "namespace disabled", setup: setup{grants: all, enabled: []string{"other"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeToolUnavailable},
		{name: "every namespace off", setup: setup{grants: all, enabled: nil}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeToolUnavailable},
		{name: "namespace disabled after the turn began", setup: setup{grants: all, enabled: []string{"demo"}, turnAction: func(_ *Turn, h *harness) {
			h.ns.Patch(context.Background(), policy.NamespacePatch{Disable: []string{"demo"}})
		}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeToolUnavailable},
		{name: "host policy", setup: setup{grants: all, enabled: []string{"demo"}, hostDeny: []string{"demo.*"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeHostPolicyDenied},
		{name: "schema violation", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":"x"}`), status: Failed, code: CodeInvalidToolArguments},
		{name: "extra argument", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"x":1}`), status: Failed, code: CodeInvalidToolArguments},
		{name: "dot-dot segment", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":["..","etc"]}`), status: Failed, code: CodeInvalidToolArguments},
		{name: "requirement outside ceiling", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.write", `{"path":["Other"]}`), status: Failed, code: CodeInvalidToolRequirement},
		{name: "no grant", setup: setup{enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "action not granted", setup: setup{grants: []policy.Grant{grant("g", []string{"write"}, policy.ScopeDescendants)}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "exact scope does not reach below", setup: setup{grants: []policy.Grant{grant("g", []string{"read"}, policy.ScopeExact, "Work")}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":["Work","a"]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "exact scope on its path", setup: setup{grants: []policy.Grant{grant("g", []string{"read"}, policy.ScopeExact, "Work")}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":["Work"]}`), status: Succeeded, ran: true, grantID: "g"},
		{name: "descendants is segment-wise", setup: setup{grants: []policy.Grant{grant("g", []string{"read"}, policy.ScopeDescendants, "Work")}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":["Workshop"]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "grant exhausted", setup: setup{grants: []policy.Grant{withMaxUses(grant("g", []string{"read"}, policy.ScopeDescendants), 1)}, enabled: []string{"demo"}, turnAction: func(tr *Turn, _ *harness) {
			tr.Call(context.Background(), call("demo.read", `{"path":[]}`))
		}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeGrantExhausted},
		{name: "budget", setup: setup{grants: all, enabled: []string{"demo"}, budgets: Budgets{MaxToolCalls: 1}, turnAction: func(tr *Turn, _ *harness) {
			tr.Call(context.Background(), call("demo.read", `{"path":[]}`))
		}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeToolCallLimitExceeded},
		{name: "draining", setup: setup{grants: all, enabled: []string{"demo"}, turnAction: func(tr *Turn, _ *harness) { tr.Drain() }}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeTurnDraining},
		{name: "grant source down", setup: setup{grantErr: errors.New("vault sealed"), enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeAuthorityUnavailable},
		{name: "handler error", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"mode":"fail"}`), status: Failed, code: CodeToolExecutionFailed, ran: true, grantID: "g-all"},
		{name: "handler retryable error", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"mode":"retry"}`), status: Failed, code: CodeToolExecutionFailed, ran: true, retry: true, grantID: "g-all"},
		{name: "handler panic", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"mode":"panic"}`), status: Failed, code: CodeToolExecutionFailed, ran: true, grantID: "g-all"},
		{name: "output not JSON", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[],"mode":"badout"}`), status: Failed, code: CodeInvalidToolResult, ran: true, grantID: "g-all"},
		{name: "output against output schema", setup: setup{grants: all, enabled: []string{"demo"}}, call: call("demo.typed", `{"path":[]}`), status: Failed, code: CodeInvalidToolResult, ran: true, grantID: "g-all"},
		{name: "failed provider", setup: setup{grants: all, enabled: []string{"demo"}, providers: []Provider{failingProvider{}}}, call: call("github.search", `{}`), status: Failed, code: CodeToolCatalogUnavailable},
		{name: "expired grant", setup: setup{grants: []policy.Grant{withWindow(grant("g", []string{"read"}, policy.ScopeDescendants), nil, ptr(t0))}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "grant not yet valid", setup: setup{grants: []policy.Grant{withWindow(grant("g", []string{"read"}, policy.ScopeDescendants), ptr(t0.Add(time.Millisecond)), nil)}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Denied, code: CodeNoMatchingGrant},
		{name: "grant window holds at the call's instant", setup: setup{grants: []policy.Grant{withWindow(grant("g", []string{"read"}, policy.ScopeDescendants), ptr(t0), ptr(t0.Add(time.Second)))}, enabled: []string{"demo"}}, call: call("demo.read", `{"path":[]}`), status: Succeeded, ran: true, grantID: "g"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turn, h := newTurn(t, tc.setup)
			before := h.ran.Load()
			res := turn.Call(context.Background(), tc.call)
			if res.Status != tc.status || res.Code != tc.code {
				t.Fatalf("got %s/%s (%s), want %s/%s", res.Status, res.Code, res.Message, tc.status, tc.code)
			}
			if res.Status != Succeeded && res.Message == "" {
				t.Errorf("refusal without a message")
			}
			if ran := h.ran.Load() > before; ran != tc.ran {
				t.Errorf("handler ran = %v, want %v", ran, tc.ran)
			}
			if res.Retryable != tc.retry {
				t.Errorf("retryable = %v, want %v", res.Retryable, tc.retry)
			}
			if res.GrantID != tc.grantID {
				t.Errorf("grant = %q, want %q", res.GrantID, tc.grantID)
			}
		})
	}
}

func withMaxUses(g policy.Grant, n int) policy.Grant {
	g.Constraints.MaxUses = &n
	return g
}

func withWindow(g policy.Grant, notBefore, expiresAt *time.Time) policy.Grant {
	g.Constraints.NotBefore, g.Constraints.ExpiresAt = notBefore, expiresAt
	return g
}

type failingProvider struct{}

func (failingProvider) Name() string { return "github" }
func (failingProvider) Tools(context.Context, policy.AccessContext) ([]Tool, error) {
	return nil, errors.New("connection refused")
}

func TestGrantApplicability(t *testing.T) {
	base := grant("g", []string{"read"}, policy.ScopeDescendants)
	cases := []struct {
		name   string
		mutate func(*policy.Grant)
		ok     bool
	}{
		{"applies", func(*policy.Grant) {}, true},
		{"other issuer", func(g *policy.Grant) { g.Issuer = "someone-else" }, false},
		{"other subject", func(g *policy.Grant) { g.Subject = "agent:alice" }, false},
		{"other namespace", func(g *policy.Grant) { g.NamespaceID = "world-2" }, false},
		{"purpose listed", func(g *policy.Grant) { g.Constraints.Purposes = []string{"audit", "test"} }, true},
		{"purpose not listed", func(g *policy.Grant) { g.Constraints.Purposes = []string{"audit"} }, false},
		{"revoked", func(g *policy.Grant) { g.RevokedAt = ptr(t0.Add(-time.Second)) }, false},
		{"revoked later", func(g *policy.Grant) { g.RevokedAt = ptr(t0.Add(time.Second)) }, true},
		{"owned resource, no owner in context", func(g *policy.Grant) { g.Capabilities[0].Resource.Owner = "carol" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := base
			g.Capabilities = []policy.Capability{base.Capabilities[0]}
			tc.mutate(&g)
			turn, _ := newTurn(t, setup{grants: []policy.Grant{g}, enabled: []string{"demo"}})
			res := turn.Call(context.Background(), call("demo.read", `{"path":["x"]}`))
			if got := res.Status == Succeeded; got != tc.ok {
				t.Fatalf("allowed = %v (%s %s), want %v", got, res.Code, res.Message, tc.ok)
			}
			tools, err := turn.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := len(tools) > 0; got != tc.ok {
				t.Fatalf("discovered %d tools, want some = %v", len(tools), tc.ok)
			}
		})
	}
}

func TestDiscoveryVersusInvocation(t *testing.T) {
	// A grant on demo:/Private exactly: discovery shows demo.read (the ceiling
	// intersects) and consumes nothing; a call elsewhere is still refused.
	g := withMaxUses(grant("g", []string{"read"}, policy.ScopeExact, "Private"), 1)
	turn, h := newTurn(t, setup{grants: []policy.Grant{g}, enabled: []string{"demo", "other"}})
	for range 3 {
		tools, err := turn.Discover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if names := toolNames(tools); fmt.Sprint(names) != "[demo.read demo.typed]" {
			t.Fatalf("discovered %v", names)
		}
	}
	if res := turn.Call(context.Background(), call("demo.read", `{"path":["Public"]}`)); res.Code != CodeNoMatchingGrant {
		t.Fatalf("call outside the grant: %s/%s", res.Status, res.Code)
	}
	if res := turn.Call(context.Background(), call("demo.read", `{"path":["Private"]}`)); res.Status != Succeeded {
		t.Fatalf("call inside the grant after discovery: %s/%s %s", res.Status, res.Code, res.Message)
	}
	if h.ran.Load() != 1 {
		t.Fatalf("handler ran %d times", h.ran.Load())
	}
	// The only use is spent: discovery now hides the tool.
	tools, _ := turn.Discover(context.Background())
	if len(tools) != 0 {
		t.Fatalf("discovered %v after the grant was used up", toolNames(tools))
	}
	// Namespace off: discovery hides, the call refuses.
	h.ns.Patch(context.Background(), policy.NamespacePatch{Disable: []string{"demo"}})
	turn2, err := h.k.BeginTurn(context.Background(), testContext(), Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	if tools, _ := turn2.Discover(context.Background()); len(tools) != 0 {
		t.Fatalf("discovered %v with the namespace off", toolNames(tools))
	}
}

func toolNames(tools []*Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

func TestMaxUsesUnderConcurrency(t *testing.T) {
	const uses, callers = 5, 64
	g := withMaxUses(grant("g", []string{"read"}, policy.ScopeDescendants), uses)
	turn, h := newTurn(t, setup{grants: []policy.Grant{g}, enabled: []string{"demo"}})
	var wg sync.WaitGroup
	var ok, exhausted atomic.Int64
	start := make(chan struct{})
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res := turn.Call(context.Background(), Call{ID: fmt.Sprint(i), Tool: "demo.read", Arguments: json.RawMessage(`{"path":[]}`)})
			switch res.Code {
			case "":
				ok.Add(1)
			case CodeGrantExhausted:
				exhausted.Add(1)
			default:
				t.Errorf("unexpected %s/%s", res.Status, res.Code)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != uses || exhausted.Load() != callers-uses || h.ran.Load() != uses {
		t.Fatalf("succeeded %d, exhausted %d, ran %d; want %d, %d, %d", ok.Load(), exhausted.Load(), h.ran.Load(), uses, callers-uses, uses)
	}
}

func TestUsesConsumedOnExecutionOnly(t *testing.T) {
	g := withMaxUses(grant("g", []string{"read"}, policy.ScopeDescendants), 1)
	turn, _ := newTurn(t, setup{grants: []policy.Grant{g}, enabled: []string{"demo"}})
	// Refused before execution: bad arguments, outside the ceiling of another tool.
	turn.Call(context.Background(), call("demo.read", `{"path":"nope"}`))
	turn.Call(context.Background(), call("demo.read", `{"path":[".."]}`))
	if res := turn.Call(context.Background(), call("demo.read", `{"path":[]}`)); res.Status != Succeeded {
		t.Fatalf("first executed call: %s/%s", res.Status, res.Code)
	}
	if res := turn.Call(context.Background(), call("demo.read", `{"path":[]}`)); res.Code != CodeGrantExhausted {
		t.Fatalf("second executed call: %s/%s", res.Status, res.Code)
	}
}

func TestUnlimitedGrantPreferredOverCounted(t *testing.T) {
	counted := withMaxUses(grant("counted", []string{"read"}, policy.ScopeDescendants), 1)
	unlimited := grant("unlimited", []string{"read"}, policy.ScopeDescendants)
	turn, _ := newTurn(t, setup{grants: []policy.Grant{counted, unlimited}, enabled: []string{"demo"}})
	for range 3 {
		if res := turn.Call(context.Background(), call("demo.read", `{"path":[]}`)); res.GrantID != "unlimited" {
			t.Fatalf("allowed by %q", res.GrantID)
		}
	}
}

func TestCancelledCall(t *testing.T) {
	turn, h := newTurn(t, setup{grants: []policy.Grant{grant("g", []string{"*"}, policy.ScopeDescendants)}, enabled: []string{"demo"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result)
	go func() { done <- turn.Call(ctx, call("demo.read", `{"path":[],"mode":"block"}`)) }()
	<-h.started
	cancel()
	res := <-done
	if !res.Cancelled {
		t.Fatalf("cancelled call: %+v", res)
	}
}

type staticProvider struct {
	name  string
	tools []Tool
}

func (p staticProvider) Name() string { return p.name }
func (p staticProvider) Tools(context.Context, policy.AccessContext) ([]Tool, error) {
	return p.tools, nil
}

func TestProvidersMergeIntoEphemeralRegistry(t *testing.T) {
	h := &harness{}
	base := demoTools(h)
	extra := base[0]
	extra.Name = "demo.extra"
	k, err := New(Config{Tools: base, Grants: StaticGrants{grant("g", []string{"*"}, policy.ScopeDescendants)}, Namespaces: policy.NewMemoryNamespaces([]string{"demo"}),
		Providers: []Provider{staticProvider{"brokered", []Tool{extra}}}, Clock: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := k.BeginTurn(context.Background(), testContext(), Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := turn.Tool("demo.extra"); !ok {
		t.Fatal("provider tool missing from the turn")
	}
	if _, ok := k.base["demo.extra"]; ok {
		t.Fatal("provider tool leaked into the shared registry")
	}
	dup := base[0]
	k2, _ := New(Config{Tools: base, Grants: StaticGrants{}, Namespaces: policy.NewMemoryNamespaces(nil), Providers: []Provider{staticProvider{"dup", []Tool{dup}}}})
	if _, err := k2.BeginTurn(context.Background(), testContext(), Budgets{}); err == nil {
		t.Fatal("duplicate tool name from a provider accepted")
	}
}

func TestRegistrationRules(t *testing.T) {
	h := &harness{}
	good := demoTools(h)[0]
	cases := []struct {
		name   string
		mutate func(*Tool)
	}{
		{"bad name", func(tl *Tool) { tl.Name = "has space" }},
		{"long name", func(tl *Tool) { tl.Name = string(make([]byte, 129)) }},
		{"empty description", func(tl *Tool) { tl.Description = "" }},
		{"read tool destructive", func(tl *Tool) { tl.Destructive = ptr(true) }},
		{"write tool read-only", func(tl *Tool) { tl.ReadWrite = Write; tl.ReadOnly = ptr(true) }},
		{"schema not an object", func(tl *Tool) { tl.InputSchema = json.RawMessage(`{"type":"string"}`) }},
		{"ceiling in another namespace", func(tl *Tool) { tl.Ceiling.Resource.Namespace = "other" }},
		{"no handler", func(tl *Tool) { tl.Handler = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool := good
			tc.mutate(&tool)
			if _, err := New(Config{Tools: []Tool{tool}, Grants: StaticGrants{}, Namespaces: policy.NewMemoryNamespaces(nil)}); err == nil {
				t.Fatal("registered")
			}
		})
	}
	if _, err := New(Config{Tools: []Tool{good, good}, Grants: StaticGrants{}, Namespaces: policy.NewMemoryNamespaces(nil)}); err == nil {
		t.Fatal("duplicate registered")
	}
}

func TestPublishFixesTheRegistry(t *testing.T) {
	turn, _ := newTurn(t, setup{grants: []policy.Grant{grant("g", []string{"*"}, policy.ScopeDescendants)}, enabled: []string{"demo"}})
	turn.Publish([]string{"demo.read", "no.such.tool"})
	if res := turn.Call(context.Background(), call("demo.read", `{"path":[]}`)); res.Status != Succeeded {
		t.Fatalf("published tool: %s/%s", res.Status, res.Code)
	}
	if res := turn.Call(context.Background(), call("demo.write", `{"path":["Work"]}`)); res.Code != CodeToolUnavailable {
		t.Fatalf("unpublished tool: %s/%s", res.Status, res.Code)
	}
	tools, _ := turn.Discover(context.Background())
	if names := toolNames(tools); fmt.Sprint(names) != "[demo.read]" {
		t.Fatalf("discovered %v", names)
	}
}
