package launcher

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

func TestMain(m *testing.M) {
	// The sandbox re-executes this test binary as its stub.
	if len(os.Args) > 1 && os.Args[1] == sandbox.StubArg {
		os.Exit(sandbox.RunStub())
	}
	os.Exit(m.Run())
}

// repoPrefixes are the pinned harnesses of this checkout (scripts/install-harnesses.sh).
func repoPrefixes() []string {
	_, file, _, _ := runtime.Caller(0)
	return []string{filepath.Join(filepath.Dir(filepath.Dir(file)), ".harnesses")}
}

// e2eWorld is a workspace outside /tmp (hidden in the sandbox, so a direct write
// would fail for the wrong reason): README.md read-only, out/ writable.
func e2eWorld(t *testing.T, harness string) (*runconfig.Config, string) {
	t.Helper()
	ws, err := os.MkdirTemp("/var/tmp", "sharedos-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("# e2e workspace\nread me, do not change me\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "out"), 0o755)
	doc := `workspace: ` + ws + `
stateDir: ` + t.TempDir() + `
context: {namespaceId: e2e, actor: "agent:` + harness + `", authority: e2e-host, purpose: e2e}
grants:
  - id: read-all
    namespaceId: e2e
    subject: "agent:` + harness + `"
    issuer: e2e-host
    issuedAt: "2026-01-01T00:00:00Z"
    capabilities: [{resource: {namespace: files, path: []}, actions: [list, stat, read, search, grep], scope: descendants}]
  - id: write-out
    namespaceId: e2e
    subject: "agent:` + harness + `"
    issuer: e2e-host
    issuedAt: "2026-01-01T00:00:00Z"
    capabilities: [{resource: {namespace: files, path: [out]}, actions: [create, replace], scope: descendants}]
namespaces: {enabled: [files]}
`
	cfg, err := runconfig.Parse([]byte(doc), ws, runconfig.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, ws
}

func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(data)
		return nil
	})
	return out
}

type e2eCase struct {
	name    string
	harness string
	options map[string]string
}

func e2eCases() []e2eCase {
	return []e2eCase{
		{name: "claude-code", harness: "claude-code"},
		{name: "codex", harness: "codex"},
		{name: "pi-extension", harness: "pi", options: map[string]string{"pi-mcp": "extension"}},
		{name: "pi-native", harness: "pi", options: map[string]string{"pi-mcp": "native"}},
	}
}

func needHarness(t *testing.T, spec harnessspec.Spec) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the turn runs in the sandbox; these tests run as root (CI is root)")
	}
	if _, err := Probe(context.Background(), spec, repoPrefixes()); err != nil {
		t.Skipf("%v (.ci/run installs the pinned harnesses)", err)
	}
}

func runE2E(t *testing.T, c e2eCase, script scriptedmodel.Script) (*Record, string, map[string]string) {
	t.Helper()
	spec, _ := harnessspec.ByID(c.harness)
	needHarness(t, spec)
	cfg, ws := e2eWorld(t, c.harness)
	before := snapshotTree(t, ws)
	model := "scripted-model"
	if spec.ModelAPI == harnessspec.APIAnthropicMessages {
		model = "claude-sonnet-4-5"
	}
	rec, err := RunTurn(context.Background(), TurnRequest{
		Spec: spec, Options: c.options, Config: cfg, Prompt: "Do the scripted steps.",
		Model:    ModelSeat{Script: &script, ID: model},
		Sandbox:  sandbox.Spec{Timeout: 150 * time.Second, Grace: 5 * time.Second},
		Prefixes: repoPrefixes(), Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if t.Failed() || testing.Verbose() {
		b, _ := json.MarshalIndent(rec, "", "  ")
		t.Logf("record: %s", b)
	}
	return rec, ws, before
}

// TestHarnessTurns: the scripted model reads a granted file, tries to replace a
// read-only one (refused in band; the harness carries on), and writes in the
// writable area. The record shows exactly those three operations, the workspace
// changed exactly by the allowed write, and the harness reached nothing but the
// bridge and the model mirror.
func TestHarnessTurns(t *testing.T) {
	script := scriptedmodel.Script{
		Steps: []scriptedmodel.Step{
			{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)},
			{Tool: "files.replace", Arguments: json.RawMessage(`{"path":["README.md"],"content":"pwned"}`)},
			{Tool: "files.create", Arguments: json.RawMessage(`{"path":["out","result.txt"],"content":"written through the bridge"}`)},
		},
		Final: "three calls made",
	}
	for _, c := range e2eCases() {
		t.Run(c.name, func(t *testing.T) {
			rec, ws, before := runE2E(t, c, script)
			if rec.Execution.Status != StatusSucceeded {
				t.Fatalf("status %s: %s (errors %v)", rec.Execution.Status, rec.Execution.Reason, rec.Execution.Errors)
			}
			var got []string
			for _, op := range rec.Execution.Operations {
				got = append(got, op.Tool+":"+op.Outcome+":"+op.Code+":"+strings.Join(op.Resource, "/"))
			}
			want := []string{"files.read:succeeded::README.md", "files.replace:denied:no_matching_grant:README.md", "files.create:succeeded::out/result.txt"}
			if !slices.Equal(got, want) {
				t.Fatalf("operations %v, want %v", got, want)
			}
			after := snapshotTree(t, ws)
			before["out/result.txt"] = "written through the bridge"
			if len(after) != len(before) {
				t.Fatalf("workspace files %v, want %v", keys(after), keys(before))
			}
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("workspace %s = %q, want %q", k, after[k], v)
				}
			}
			if !rec.Execution.Bridge.Initialized || !rec.Execution.Bridge.Listed {
				t.Fatalf("bridge: %+v", rec.Execution.Bridge)
			}
			if len(rec.Sandbox.Violations) != 0 {
				t.Fatalf("violations in a clean run: %+v", rec.Sandbox.Violations)
			}
			if rec.Identity.CatalogHash == "" || rec.Identity.PolicyHash == "" || rec.Identity.PromptHash == "" || rec.Identity.HarnessVersion == "" {
				t.Fatalf("identity incomplete: %+v", rec.Identity)
			}
		})
	}
}

// TestModelAsksForLocalTools: a model that asks for the harness's own shell gets
// nothing done — the strict launch leaves no such tool — and the record shows the
// attempt.
func TestModelAsksForLocalTools(t *testing.T) {
	local := map[string]string{"claude-code": "Bash", "codex": "shell", "pi": "bash"}
	for _, c := range e2eCases() {
		t.Run(c.name, func(t *testing.T) {
			marker := filepath.Join("/var/tmp", "sharedos-local-tool-"+c.name)
			os.Remove(marker)
			t.Cleanup(func() { os.Remove(marker) })
			script := scriptedmodel.Script{
				Steps: []scriptedmodel.Step{{Tool: local[c.harness], Local: true,
					Arguments: json.RawMessage(`{"command":"touch ` + marker + `","cmd":"touch ` + marker + `"}`)}},
				Final: "asked for the shell",
			}
			rec, _, _ := runE2E(t, c, script)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("BREACH: the harness's own %s ran", local[c.harness])
			}
			if len(rec.Execution.Operations) != 0 {
				t.Fatalf("operations reached the bridge: %+v", rec.Execution.Operations)
			}
			asked := false
			for _, q := range rec.Model.Requests {
				if q.EmittedTool == local[c.harness] {
					asked = true
					if q.Offered {
						t.Errorf("the strict launch offered %s to the model: %v", q.EmittedTool, q.OfferedTools)
					}
				}
			}
			if !asked {
				t.Fatalf("the record does not show the attempt: %+v", rec.Model.Requests)
			}
		})
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
