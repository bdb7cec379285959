package files

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// published is the wire form of a tool as §2 of the contract defines it.
func published(t *kernel.Tool) map[string]any {
	ann := map[string]any{"readOnlyHint": t.ReadOnlyHint()}
	if t.Destructive != nil {
		ann["destructiveHint"] = *t.Destructive
	}
	if t.Idempotent != nil {
		ann["idempotentHint"] = *t.Idempotent
	}
	var schema any
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		panic(err)
	}
	return map[string]any{
		"name": t.Name, "description": t.Description, "inputSchema": schema,
		"annotations": ann, "metadata": map[string]any{"namespace": t.Namespace, "source": t.Source},
	}
}

func TestCatalogueMatchesWireVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "wire-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Catalogues []struct {
			Name        string           `json:"name"`
			Tools       []map[string]any `json:"tools"`
			Canonical   string           `json:"canonical"`
			CatalogHash string           `json:"catalogHash"`
		} `json:"catalogues"`
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(vectors.Catalogues, func(c struct {
		Name        string           `json:"name"`
		Tools       []map[string]any `json:"tools"`
		Canonical   string           `json:"canonical"`
		CatalogHash string           `json:"catalogHash"`
	}) bool {
		return c.Name == "files (all twelve)"
	})
	if i < 0 {
		t.Fatal("catalogue \"files (all twelve)\" is missing from the vectors")
	}
	want := vectors.Catalogues[i]
	e := newEnv(t)
	tools := e.w.Tools()
	if len(tools) != 12 || len(want.Tools) != 12 {
		t.Fatalf("got %d tools, vectors have %d; want 12", len(tools), len(want.Tools))
	}
	var got []map[string]any
	for i := range tools {
		got = append(got, published(&tools[i]))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want.Tools[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want.Tools[i])
			t.Errorf("tool %d differs:\n got %s\nwant %s", i, g, w)
		}
	}
	canon, err := canonjson.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(canon) != want.Canonical {
		t.Errorf("canonical catalogue differs:\n got %s\nwant %s", canon, want.Canonical)
	}
	hash, err := canonjson.HashValue(got)
	if err != nil {
		t.Fatal(err)
	}
	if hash != want.CatalogHash {
		t.Errorf("catalogHash %s; want %s", hash, want.CatalogHash)
	}
}

func TestToolsClassesAndCeilings(t *testing.T) {
	e := newEnv(t)
	want := map[string]struct {
		action      string
		rw          kernel.ReadWrite
		destructive bool
	}{
		"files.list": {"list", kernel.Read, false}, "files.stat": {"stat", kernel.Read, false},
		"files.read": {"read", kernel.Read, false}, "files.search": {"search", kernel.Read, false},
		"files.grep": {"grep", kernel.Read, false}, "files.create": {"create", kernel.Write, false},
		"files.replace": {"replace", kernel.Write, true}, "files.append": {"append", kernel.Write, false},
		"files.delete": {"delete", kernel.Write, true}, "files.snapshot.create": {"snapshot:create", kernel.Write, false},
		"files.snapshot.list": {"snapshot:list", kernel.Read, false}, "files.snapshot.restore": {"snapshot:restore", kernel.Write, true},
	}
	for _, tool := range e.w.Tools() {
		t.Run(tool.Name, func(t *testing.T) {
			w, ok := want[tool.Name]
			if !ok {
				t.Fatalf("unexpected tool")
			}
			if err := tool.Validate(); err != nil {
				t.Fatal(err)
			}
			if tool.ReadWrite != w.rw || (tool.Destructive != nil && *tool.Destructive) != w.destructive || tool.ReadOnly != nil || tool.Idempotent != nil {
				t.Errorf("class %s destructive %v; want %s %v", tool.ReadWrite, tool.Destructive, w.rw, w.destructive)
			}
			if tool.Namespace != "files" || tool.Source != "sharedos" {
				t.Errorf("namespace %q source %q", tool.Namespace, tool.Source)
			}
			c := tool.Ceiling
			if c.Resource.Namespace != "files" || c.Resource.Path == nil || len(c.Resource.Path) != 0 || !slices.Equal(c.Actions, []string{w.action}) || c.Scope != policy.ScopeDescendants {
				t.Errorf("ceiling %+v", c)
			}
			req, err := tool.Requirement(map[string]any{"path": []any{"Work", "Private"}}, testContext())
			if err != nil {
				t.Fatal(err)
			}
			if req.Action != w.action || req.Resource.Namespace != "files" || !slices.Equal(req.Resource.Path, []string{"Work", "Private"}) {
				t.Errorf("requirement %+v", req)
			}
			if !c.Allows(req) {
				t.Errorf("the ceiling does not allow the tool's own requirement")
			}
			req, err = tool.Requirement(map[string]any{"path": []any{}}, testContext())
			if err != nil || req.Resource.Path == nil || len(req.Resource.Path) != 0 {
				t.Errorf("root requirement %+v %v", req, err)
			}
			if _, err := tool.Requirement(map[string]any{"path": []any{".."}}, testContext()); err == nil {
				t.Errorf("\"..\" accepted")
			}
		})
	}
}

// A grant narrowed to one directory must keep every tool inside it: the kernel
// asks each tool for its requirement and checks it against the grant.
func TestGrantNarrowsPaths(t *testing.T) {
	e := newEnv(t)
	e.write("Work/a.txt", "hello")
	e.write("Private/b.txt", "secret")
	k, err := kernel.New(kernel.Config{
		Tools: e.w.Tools(),
		Grants: kernel.StaticGrants{{ID: "g", NamespaceID: "ws", Subject: "agent:a", Issuer: "host", IssuedAt: testGrant().IssuedAt,
			Capabilities: []policy.Capability{{Resource: policy.Resource{Namespace: "files", Path: []string{"Work"}}, Actions: []string{"read", "list"}, Scope: policy.ScopeDescendants}}}},
		Namespaces: policy.NewMemoryNamespaces([]string{"files"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.turn, err = k.BeginTurn(t.Context(), testContext(), kernel.Budgets{})
	if err != nil {
		t.Fatal(err)
	}
	var r readOutput
	e.ok("files.read", obj{"path": p("Work", "a.txt")}, &r)
	if r.Content != "hello" {
		t.Errorf("content %q", r.Content)
	}
	e.fail("files.read", obj{"path": p("Private", "b.txt")}, kernel.CodeNoMatchingGrant, "no grant")
	e.fail("files.list", obj{"path": p()}, kernel.CodeNoMatchingGrant, "no grant")
	e.fail("files.create", obj{"path": p("Work", "c.txt"), "content": "x"}, kernel.CodeNoMatchingGrant, "no grant")
	if e.exists("Work/c.txt") {
		t.Error("a denied create wrote a file")
	}
}

func TestOpenRefusesStateInsideWorkspace(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(base, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ws, state, want string }{
		{"state inside", ws, filepath.Join(ws, ".state"), "inside the workspace"},
		{"state equals workspace", ws, ws, "inside the workspace"},
		{"state inside via symlink", ws, filepath.Join(base, "alias", "st"), "inside the workspace"},
		{"workspace inside state", ws, base, "inside the state directory"},
		{"missing workspace", filepath.Join(base, "nope"), filepath.Join(base, "st"), "workspace"},
		{"no state", ws, "", "state directory is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Open(Options{Workspace: tc.ws, StateDir: tc.state})
			if err == nil {
				w.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("a refused Open left %d entries in the workspace", len(ents))
	}
	if _, err := Open(Options{Workspace: ws, StateDir: filepath.Join(base, "st"), MaxReadBytes: -1}); err == nil {
		t.Error("a negative limit was accepted")
	}
}
