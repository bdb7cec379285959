package runconfig

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/policy"
)

func TestExampleConfig(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "testdata", "example", "config.yaml"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(cfg.Workspace) != "workspace" || !filepath.IsAbs(cfg.Workspace) {
		t.Errorf("workspace %s", cfg.Workspace)
	}
	if len(cfg.Grants) != 2 || cfg.Grants[1].Constraints.MaxUses == nil || *cfg.Grants[1].Constraints.MaxUses != 20 {
		t.Errorf("grants %+v", cfg.Grants)
	}
	if got := cfg.Grants[0].Capabilities[0].Actions; !slices.Contains(got, "snapshot:list") {
		t.Errorf("actions %v", got)
	}
	if cfg.Context.Actor.String() != "agent:example-agent" || cfg.Budgets.MaxToolCalls != 50 {
		t.Errorf("context %+v budgets %+v", cfg.Context, cfg.Budgets)
	}
	if cfg.ToolPolicy.Mode != policy.ModeStrict {
		t.Errorf("policy %+v", cfg.ToolPolicy)
	}
}

func TestDefault(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	cfg, err := Default(ws, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	actions := cfg.Grants[0].Capabilities[0].Actions
	for _, a := range append(ReadActions(), WriteActions()...) {
		if !slices.Contains(actions, a) {
			t.Errorf("default grant lacks %s", a)
		}
	}
	if !slices.Equal(cfg.EnabledNamespaces, []string{"files"}) {
		t.Errorf("namespaces %v", cfg.EnabledNamespaces)
	}
	if strings.HasPrefix(cfg.StateDir, cfg.Workspace) {
		t.Errorf("state dir %s inside workspace %s", cfg.StateDir, cfg.Workspace)
	}
	ro, err := Default(ws, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := ro.Grants[0].Capabilities[0].Actions; !slices.Equal(got, ReadActions()) {
		t.Errorf("read-only actions %v", got)
	}
}

func TestReadOnlyOverrideOnFile(t *testing.T) {
	cfg, err := Load(filepath.Join("..", "testdata", "example", "config.yaml"), Overrides{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// The write-docs grant had only write actions, so it is gone.
	if len(cfg.Grants) != 1 || cfg.Grants[0].ID != "read-everything" {
		t.Fatalf("grants %+v", cfg.Grants)
	}
}

func TestInvalidFiles(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ws"), 0o755)
	os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644)
	base := `workspace: ws
stateDir: state
context: {namespaceId: w, actor: "agent:a", authority: host, purpose: p}
namespaces: {enabled: [files]}
`
	grant := `grants:
  - {id: g, namespaceId: w, subject: "agent:a", issuer: host, issuedAt: "2026-01-01T00:00:00Z", capabilities: [{resource: {namespace: files, path: []}, actions: [read], scope: exact}]}
`
	cases := []struct {
		name, doc, wantErr string
	}{
		{"valid", base + grant, ""},
		{"json works too", `{"workspace":"ws","stateDir":"state","context":{"namespaceId":"w","actor":"agent:a","authority":"host","purpose":"p"},"namespaces":{"enabled":[]}}`, ""},
		{"unknown top-level field", base + "colour: blue\n", `unknown field "colour"`},
		{"unknown nested field", strings.Replace(base, "purpose: p", "purpose: p, mood: x", 1), `unknown field "mood"`},
		{"wrong type", base + "budgets: {maxToolCalls: many}\n", "field budgets.maxToolCalls"},
		{"negative budget", base + "budgets: {maxToolCalls: -1}\n", "budgets.maxToolCalls"},
		{"missing workspace", strings.Replace(base, "workspace: ws\n", "", 1), "workspace: required"},
		{"workspace not a dir", strings.Replace(base, "workspace: ws", "workspace: afile", 1), "not a directory"},
		{"workspace missing", strings.Replace(base, "workspace: ws", "workspace: nope", 1), "workspace:"},
		{"state inside workspace", strings.Replace(base, "stateDir: state", "stateDir: ws/.state", 1), "inside the workspace"},
		{"bad actor", strings.Replace(base, `"agent:a"`, `"robot:a"`, 1), "context.actor"},
		{"empty purpose", strings.Replace(base, "purpose: p", "purpose: ' '", 1), "context.purpose"},
		{"namespaces missing", strings.Replace(base, "namespaces: {enabled: [files]}\n", "", 1), "namespaces.enabled: required"},
		{"bad grant", base + strings.Replace(grant, "scope: exact", "scope: wide", 1), "grants[0].capabilities[0].scope"},
		{"strict with external", base + "toolPolicy: {mode: strict, externalDirect: [github]}\n", "cannot declare externally connected tools"},
		{"policy unknown key", base + "toolPolicy: {mode: strict, extra: 1}\n", "unknown field"},
		{"grants and grantsFile", base + grant + "grantsFile: g.json\n", "give one or the other"},
		{"grantsFile missing", base + "grantsFile: g.json\n", "grantsFile"},
		{"bad hostDeny", base + "hostDeny: ['no such tool name']\n", "hostDeny[0]"},
		{"not yaml", "workspace: [unclosed", "not valid JSON or YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "config.yaml")
			os.WriteFile(path, []byte(tc.doc), 0o644)
			_, err := Load(path, Overrides{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestNamespaceSettingsFileSeededOnce(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "ws"), 0o755)
	doc := `workspace: ws
stateDir: state
context: {namespaceId: w, actor: "agent:a", authority: host, purpose: p}
namespaces: {enabled: [files], settingsFile: ns.json}
`
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte(doc), 0o644)
	cfg, err := Load(path, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := cfg.Namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Enabled(ctx); !slices.Equal(got, []string{"files"}) {
		t.Fatalf("seeded %v", got)
	}
	store.Patch(ctx, policy.NamespacePatch{Disable: []string{"files"}})
	// A later run does not re-seed: the shared file is the truth.
	store2, _ := cfg.Namespaces(ctx)
	if got, _ := store2.Enabled(ctx); len(got) != 0 {
		t.Fatalf("re-seeded: %v", got)
	}
}

func TestDefaultStateDirAvoidsTheWorkspace(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", home)
	cfg, err := Default(home, false, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if within(cfg.Workspace, cfg.StateDir) || !strings.HasPrefix(cfg.StateDir, "/var/tmp/") {
		t.Fatalf("workspace %s, state %s", cfg.Workspace, cfg.StateDir)
	}
	if _, err := Default("/", false, time.Now()); err == nil || !strings.Contains(err.Error(), "refusing /") {
		t.Fatalf("workspace / accepted: %v", err)
	}
}
