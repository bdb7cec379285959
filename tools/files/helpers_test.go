package files

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// env is a workspace behind a real kernel, so that every test call goes through
// schema validation, the requirement, the ceiling and the grant check.
type env struct {
	t       testing.TB
	ws      string // workspace directory
	state   string // state directory
	outside string // a directory next to the workspace that must never change
	w       *Workspace
	turn    *kernel.Turn
	n       *atomic.Int64
}

// in is the same env reporting to another test, for subtests.
func (e *env) in(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}

func testContext() policy.AccessContext {
	return policy.AccessContext{NamespaceID: "ws", Actor: policy.Actor{Kind: "agent", ID: "a"}, Authority: "host", Purpose: "test"}
}

func testGrant() policy.Grant {
	return policy.Grant{ID: "g", NamespaceID: "ws", Subject: "agent:a", Issuer: "host", IssuedAt: time.Now(),
		Capabilities: []policy.Capability{{Resource: policy.Resource{Namespace: "files", Path: []string{}}, Actions: []string{"*"}, Scope: policy.ScopeDescendants}}}
}

func newEnv(t testing.TB, tweak ...func(*Options)) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, n: new(atomic.Int64), ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.ws, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.outside, "sentinel"), []byte("SENTINEL outside content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Workspace: e.ws, StateDir: e.state}
	for _, f := range tweak {
		f(&opts)
	}
	w, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	e.w = w
	k, err := kernel.New(kernel.Config{
		Tools:      w.Tools(),
		Grants:     kernel.StaticGrants{testGrant()},
		Namespaces: policy.NewMemoryNamespaces([]string{"files"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.turn, err = k.BeginTurn(context.Background(), testContext(), kernel.Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// call runs a tool through the kernel; args is marshalled to JSON as a harness would send it.
func (e *env) call(tool string, args any) kernel.Result {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.turn.Call(context.Background(), kernel.Call{ID: fmt.Sprint(e.n.Add(1)), Tool: tool, Arguments: raw})
}

// ok runs a call that must succeed and decodes its output (through JSON, as the
// bridge would send it) into out.
func (e *env) ok(tool string, args any, out any) {
	e.t.Helper()
	res := e.call(tool, args)
	if res.Status != kernel.Succeeded {
		e.t.Fatalf("%s %v: %s %s: %s", tool, args, res.Status, res.Code, res.Message)
	}
	if out != nil {
		decodeOutput(e.t, res.Output, out)
	}
}

// fail runs a call that must not succeed, checks its code and that the message
// mentions want, and returns the result.
func (e *env) fail(tool string, args any, code, want string) kernel.Result {
	e.t.Helper()
	res := e.call(tool, args)
	if res.Status == kernel.Succeeded {
		e.t.Fatalf("%s %v: succeeded with %v; want %s", tool, args, res.Output, code)
	}
	if res.Code != code {
		e.t.Fatalf("%s %v: code %s (%s); want %s", tool, args, res.Code, res.Message, code)
	}
	if !strings.Contains(res.Message, want) {
		e.t.Fatalf("%s %v: message %q does not mention %q", tool, args, res.Message, want)
	}
	return res
}

func decodeOutput(t testing.TB, v any, out any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

// write puts a file in the workspace directly (test setup, not through the tools).
func (e *env) write(rel string, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) readWS(rel string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.ws, filepath.FromSlash(rel)))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func (e *env) exists(rel string) bool {
	_, err := os.Lstat(filepath.Join(e.ws, filepath.FromSlash(rel)))
	return err == nil
}

// checkOutside fails the test if the sentinel directory changed in any way.
func (e *env) checkOutside() {
	e.t.Helper()
	ents, err := os.ReadDir(e.outside)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "sentinel" {
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		e.t.Fatalf("the directory outside the workspace changed: %v", names)
	}
	fi, err := os.Lstat(filepath.Join(e.outside, "sentinel"))
	if err != nil || !fi.Mode().IsRegular() {
		e.t.Fatalf("sentinel is no longer a regular file: %v %v", fi, err)
	}
	data, err := os.ReadFile(filepath.Join(e.outside, "sentinel"))
	if err != nil || string(data) != "SENTINEL outside content\n" {
		e.t.Fatalf("sentinel changed: %q %v", data, err)
	}
}

// p builds a path argument.
func p(segs ...string) []string {
	if segs == nil {
		return []string{}
	}
	return segs
}

type obj = map[string]any
