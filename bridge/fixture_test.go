package bridge

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
	"github.com/sharedos/sharedos-run/tools/files"
)

const testSecret = "bridge-test-secret-0123456789"

// testTools are extra tools in namespace "test" that let the bridge tests block,
// answer big, and see cancellation.
type testTools struct {
	entered   chan struct{}
	cancelled chan struct{}
}

func newTestTools() *testTools {
	return &testTools{entered: make(chan struct{}, 16), cancelled: make(chan struct{}, 16)}
}

func (tt *testTools) tools() []kernel.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	ceiling := policy.Capability{Resource: policy.Resource{Namespace: "test", Path: []string{}}, Actions: []string{"run"}, Scope: policy.ScopeDescendants}
	req := func(map[string]any, policy.AccessContext) (policy.Requirement, error) {
		return policy.Requirement{Resource: policy.Resource{Namespace: "test", Path: []string{}}, Action: "run"}, nil
	}
	return []kernel.Tool{
		{Name: "test.block", Description: "Blocks until cancelled.", InputSchema: schema, Namespace: "test", Source: "sharedos", ReadWrite: kernel.Read,
			Ceiling: ceiling, Requirement: req, Handler: func(ctx context.Context, _ kernel.Invocation) (any, error) {
				tt.entered <- struct{}{}
				<-ctx.Done()
				tt.cancelled <- struct{}{}
				return nil, ctx.Err()
			}},
		{Name: "test.big", Description: "Answers n bytes.", InputSchema: schema, Namespace: "test", Source: "sharedos", ReadWrite: kernel.Read,
			Ceiling: ceiling, Requirement: req, Handler: func(_ context.Context, inv kernel.Invocation) (any, error) {
				n, _ := inv.Arguments["n"].(float64)
				return strings.Repeat("x", int(n)), nil
			}},
		{Name: "test.typed", Description: "Answers an object under an output schema.", InputSchema: schema, Namespace: "test", Source: "sharedos", ReadWrite: kernel.Read,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`),
			Ceiling:      ceiling, Requirement: req, Handler: func(context.Context, kernel.Invocation) (any, error) {
				return map[string]any{"ok": true}, nil
			}},
	}
}

type fixture struct {
	t         testing.TB
	ws        string
	server    *Server
	url       string
	token     string
	addr      string
	catalog   Catalog
	turn      *kernel.Turn
	testTools *testTools
	serveErr  chan error
}

// newFixture serves a bridge over a workspace with README.md and docs/notes.txt;
// grants: everything under files:/ read, files:/docs write, and test.* run.
func newFixture(t testing.TB, limits Limits) *fixture {
	t.Helper()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# hello\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "docs"), 0o755)
	os.WriteFile(filepath.Join(ws, "docs", "notes.txt"), []byte("notes\n"), 0o644)
	w, err := files.Open(files.Options{Workspace: ws, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	tt := newTestTools()
	ac := policy.AccessContext{NamespaceID: "world-1", Actor: policy.Actor{Kind: policy.ActorAgent, ID: "bob"}, Authority: "host", Purpose: "test"}
	g := func(id, ns string, path []string, actions ...string) policy.Grant {
		return policy.Grant{ID: id, NamespaceID: "world-1", Subject: "agent:bob", Issuer: "host", IssuedAt: time.Now().Add(-time.Hour),
			Capabilities: []policy.Capability{{Resource: policy.Resource{Namespace: ns, Path: path}, Actions: actions, Scope: policy.ScopeDescendants}}}
	}
	k, err := kernel.New(kernel.Config{
		Tools: append(w.Tools(), tt.tools()...),
		Grants: kernel.StaticGrants{
			g("read", "files", []string{}, "list", "stat", "read", "search", "grep"),
			g("write-docs", "files", []string{"docs"}, "create", "replace", "append"),
			g("test", "test", []string{}, "run"),
		},
		Namespaces: policy.NewMemoryNamespaces([]string{"files", "test"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := k.BeginTurn(context.Background(), ac, kernel.Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	tools, err := turn.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cat, err := NewCatalog("exec-test-1", tools)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range cat.Tools {
		names = append(names, tool.Name)
	}
	turn.Publish(names)
	srv, err := New(Options{Catalog: cat, Turn: turn, TraceID: "trace-1", Secret: []byte(testSecret), Version: "test", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	token, err := srv.Token(time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ws: ws, server: srv, url: "http://" + l.Addr().String() + Path, token: token, addr: l.Addr().String(),
		catalog: cat, turn: turn, testTools: tt, serveErr: make(chan error, 1)}
	go func() { f.serveErr <- srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return f
}

// authClient adds the bearer token to every request.
type authTransport struct {
	token string
	base  http.RoundTripper
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return a.base.RoundTrip(r)
}

func (f *fixture) httpClient() *http.Client {
	return &http.Client{Transport: authTransport{token: f.token, base: http.DefaultTransport.(*http.Transport).Clone()}}
}
