package harnessspec

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixedInput is the LaunchInput every golden file is built from.
func fixedInput(exe string) LaunchInput {
	return LaunchInput{
		Prompt:      "Read README.md, then say done.",
		ExecutionID: "exec-0001",
		BridgeURL:   "http://127.0.0.1:41234/mcp",
		TokenEnv:    "SHAREDOS_MCP_TOKEN",
		Home:        "/var/lib/sharedos-run/scratch/home",
		WorkDir:     "/var/lib/sharedos-run/scratch/work",
		Executable:  "/opt/sharedos/harnesses/node_modules/.bin/" + exe,
		Prefix:      "/opt/sharedos/harnesses",
		Model: Model{
			ID:        "scripted",
			Provider:  "scripted",
			BaseURL:   "http://127.0.0.1:41235",
			APIKeyEnv: "SHAREDOS_MODEL_KEY",
		},
	}
}

type goldenCase struct {
	name string
	spec string
	in   func(LaunchInput) LaunchInput
}

func same(in LaunchInput) LaunchInput { return in }

func goldenCases() []goldenCase {
	return []goldenCase{
		{"claude-code", "claude-code", same},
		{"claude-code-dash-prompt-extra-args", "claude-code", func(in LaunchInput) LaunchInput {
			in.Prompt = "--help is not a flag here"
			in.ExtraArgs = []string{"--max-turns", "3"}
			return in
		}},
		{"claude-code-provider-key", "claude-code", func(in LaunchInput) LaunchInput {
			in.Model = Model{ID: "claude-sonnet-4-5", Provider: "anthropic", APIKeyEnv: "ANTHROPIC_API_KEY"}
			return in
		}},
		{"codex", "codex", same},
		{"codex-codemode", "codex", func(in LaunchInput) LaunchInput {
			in.Model.ID = "gpt-6.2-sol"
			return in
		}},
		{"codex-openai", "codex", func(in LaunchInput) LaunchInput {
			in.Model = Model{ID: "gpt-6.2-sol", Provider: "openai", APIKeyEnv: "SHAREDOS_MODEL_KEY"}
			return in
		}},
		{"pi-extension-rpc", "pi", same},
		{"pi-native-rpc", "pi", func(in LaunchInput) LaunchInput {
			in.Options = map[string]string{"pi-mcp": "native"}
			return in
		}},
		{"pi-native-json", "pi", func(in LaunchInput) LaunchInput {
			in.Options = map[string]string{"pi-mcp": "native", "pi-mode": "json"}
			return in
		}},
		{"pi-extension-json-no-key", "pi", func(in LaunchInput) LaunchInput {
			in.Options = map[string]string{"pi-mode": "json"}
			in.Model.APIKeyEnv = ""
			return in
		}},
		{"deepseek", "deepseek", same},
	}
}

// goldenView is a Launch as a reviewer reads it: file contents as text, modes
// in octal, stdin lines as strings.
type goldenView struct {
	Argv                []string          `json:"argv"`
	Env                 map[string]string `json:"env"`
	EnvFrom             map[string]string `json:"envFrom,omitempty"`
	PathPrefix          []string          `json:"pathPrefix,omitempty"`
	Dirs                []string          `json:"dirs,omitempty"`
	Files               []goldenFile      `json:"files,omitempty"`
	Stdin               goldenStdin       `json:"stdin"`
	MCPSupport          string            `json:"mcpSupport"`
	MCPExtension        string            `json:"mcpExtension,omitempty"`
	MCPExtensionVersion string            `json:"mcpExtensionVersion,omitempty"`
	DeclaredLocalTools  []string          `json:"declaredLocalTools"`
	LocalToolsMeasured  bool              `json:"localToolsMeasured"`
	ToolNaming          string            `json:"toolNaming"`
	Warnings            []string          `json:"warnings,omitempty"`
}

type goldenFile struct {
	Path    string `json:"path"`
	Mode    string `json:"mode"`
	Content string `json:"content"`
}

type goldenStdin struct {
	Mode  string   `json:"mode"`
	Lines []string `json:"lines,omitempty"`
}

func render(t *testing.T, l Launch) []byte {
	t.Helper()
	v := goldenView{
		Argv: l.Argv, Env: l.Env, EnvFrom: l.EnvFrom, PathPrefix: l.PathPrefix, Dirs: l.Dirs,
		Stdin:      goldenStdin{Mode: l.Stdin.Mode},
		MCPSupport: l.MCPSupport, MCPExtension: l.MCPExtension, MCPExtensionVersion: l.MCPExtensionVersion,
		DeclaredLocalTools: l.DeclaredLocalTools, LocalToolsMeasured: l.LocalToolsMeasured,
		ToolNaming: l.ToolNaming, Warnings: l.Warnings,
	}
	for _, f := range l.Files {
		v.Files = append(v.Files, goldenFile{Path: f.Path, Mode: fmt.Sprintf("%04o", f.Mode), Content: string(f.Content)})
	}
	for _, line := range l.Stdin.Lines {
		v.Stdin.Lines = append(v.Stdin.Lines, string(line))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func mustSpec(t *testing.T, id string) Spec {
	t.Helper()
	s, ok := ByID(id)
	if !ok {
		t.Fatalf("no spec %q", id)
	}
	return s
}

func TestLaunchGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, tc.spec)
			exe := s.Probe.Executables[0]
			l, err := s.Launch(tc.in(fixedInput(exe)))
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, l)
			path := filepath.Join("testdata", "golden", tc.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./harnessspec -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("launch differs from %s (go test ./harnessspec -run TestLaunchGolden -update to accept):\n%s", path, got)
			}
		})
	}
}

// TestLaunchInvariants checks every golden case for what must hold whatever
// the harness: argv[0], files only under Home/WorkDir, a stdin plan, a known
// MCP support kind, sorted declared tools, and the token referenced by name.
func TestLaunchInvariants(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, tc.spec)
			in := tc.in(fixedInput(s.Probe.Executables[0]))
			l, err := s.Launch(in)
			if err != nil {
				t.Fatal(err)
			}
			if l.Argv[0] != in.Executable {
				t.Errorf("argv[0] = %q, want %q", l.Argv[0], in.Executable)
			}
			if !strings.Contains(strings.Join(l.Argv, "\x00")+string(bytes.Join(l.Stdin.Lines, nil)), in.Prompt) {
				t.Errorf("the prompt reaches the harness neither in argv nor on stdin")
			}
			for _, f := range l.Files {
				if !under(f.Path, in.Home) && !under(f.Path, in.WorkDir) {
					t.Errorf("file %s is outside Home and WorkDir", f.Path)
				}
				if f.Mode == 0 || f.Mode&0o077 != 0 {
					t.Errorf("file %s mode %04o: want private and non-zero", f.Path, f.Mode)
				}
				if bytes.Contains(f.Content, []byte("Bearer")) && !bytes.Contains(f.Content, []byte("Bearer ${"+in.TokenEnv+"}")) {
					t.Errorf("file %s has an Authorization header that does not reference ${%s}", f.Path, in.TokenEnv)
				}
				if strings.HasSuffix(f.Path, ".json") && !json.Valid(f.Content) {
					t.Errorf("file %s is not valid JSON", f.Path)
				}
			}
			for _, d := range l.Dirs {
				if !under(d, in.Home) && !under(d, in.WorkDir) {
					t.Errorf("dir %s is outside Home and WorkDir", d)
				}
			}
			if l.Stdin.Mode != StdinDevNull && l.Stdin.Mode != StdinRPC {
				t.Errorf("stdin mode %q", l.Stdin.Mode)
			}
			if l.MCPSupport != MCPNative && l.MCPSupport != MCPExtension {
				t.Errorf("mcpSupport %q", l.MCPSupport)
			}
			if (l.MCPSupport == MCPExtension) != (l.MCPExtension != "") {
				t.Errorf("mcpSupport %q with mcpExtension %q", l.MCPSupport, l.MCPExtension)
			}
			if l.DeclaredLocalTools == nil || !sort.StringsAreSorted(l.DeclaredLocalTools) {
				t.Errorf("declared local tools %v: want a sorted, non-nil list", l.DeclaredLocalTools)
			}
			if l.ToolNaming == "" {
				t.Error("no tool naming")
			}
			for name := range l.Env {
				if name == in.TokenEnv || name == "HOME" || name == "PATH" {
					t.Errorf("spec sets %s, which is the launcher's", name)
				}
			}
		})
	}
}

func under(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// TestSecretsNeverInLaunch puts real-looking values into the variables the
// launch names and checks that none reaches argv, env values, files or stdin:
// the spec handles names only.
func TestSecretsNeverInLaunch(t *testing.T) {
	const tokenSecret, keySecret = "tok-SENTINEL-4711", "sk-SENTINEL-0815"
	t.Setenv("SHAREDOS_MCP_TOKEN", tokenSecret)
	t.Setenv("SHAREDOS_MODEL_KEY", keySecret)
	t.Setenv("ANTHROPIC_API_KEY", keySecret)
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSpec(t, tc.spec)
			l, err := s.Launch(tc.in(fixedInput(s.Probe.Executables[0])))
			if err != nil {
				t.Fatal(err)
			}
			var all []string
			all = append(all, l.Argv...)
			for k, v := range l.Env {
				all = append(all, k+"="+v)
			}
			for k, v := range l.EnvFrom {
				all = append(all, k+"="+v)
			}
			for _, f := range l.Files {
				all = append(all, string(f.Content))
			}
			for _, line := range l.Stdin.Lines {
				all = append(all, string(line))
			}
			for _, s := range all {
				if strings.Contains(s, "SENTINEL") {
					t.Errorf("a secret value leaked into the launch: %q", s)
				}
			}
			for _, a := range l.Argv {
				if strings.Contains(a, "Bearer") {
					t.Errorf("an Authorization header is in argv: %q", a)
				}
			}
		})
	}
}

func TestLaunchRefusesBadInput(t *testing.T) {
	breakers := []struct {
		name, want string
		mod        func(*LaunchInput)
	}{
		{"missing BridgeURL", "missing BridgeURL", func(in *LaunchInput) { in.BridgeURL = "" }},
		{"BridgeURL not http", "not an http(s) URL", func(in *LaunchInput) { in.BridgeURL = "unix:///run/bridge.sock" }},
		{"missing TokenEnv", "missing TokenEnv", func(in *LaunchInput) { in.TokenEnv = "" }},
		{"TokenEnv is a value", "not a variable name", func(in *LaunchInput) { in.TokenEnv = "Bearer abc.def" }},
		{"APIKeyEnv is a value", "not a variable name", func(in *LaunchInput) { in.Model.APIKeyEnv = "sk-live-123" }},
		{"empty prompt", "empty prompt", func(in *LaunchInput) { in.Prompt = "  " }},
		{"relative Home", "Home", func(in *LaunchInput) { in.Home = "scratch/home" }},
		{"relative WorkDir", "WorkDir", func(in *LaunchInput) { in.WorkDir = "" }},
		{"missing Executable", "missing Executable", func(in *LaunchInput) { in.Executable = "" }},
		{"unknown option", "unknown option", func(in *LaunchInput) { in.Options = map[string]string{"turbo": "on"} }},
	}
	for _, s := range All() {
		for _, b := range breakers {
			t.Run(s.ID+"/"+b.name, func(t *testing.T) {
				in := fixedInput(s.Probe.Executables[0])
				b.mod(&in)
				_, err := s.Launch(in)
				if err == nil || !strings.Contains(err.Error(), b.want) {
					t.Fatalf("err = %v, want one mentioning %q", err, b.want)
				}
			})
		}
	}
}

func TestPiRefusals(t *testing.T) {
	s := mustSpec(t, "pi")
	cases := []struct {
		name, want string
		mod        func(*LaunchInput)
	}{
		{"unknown pi-mcp value", `unknown value "builtin"`, func(in *LaunchInput) { in.Options = map[string]string{"pi-mcp": "builtin"} }},
		{"unknown pi-mode value", `unknown value "text"`, func(in *LaunchInput) { in.Options = map[string]string{"pi-mode": "text"} }},
		{"extension without prefix", "needs the pinned prefix", func(in *LaunchInput) { in.Prefix = "" }},
		{"custom endpoint without model id", "needs a model id", func(in *LaunchInput) { in.Model.ID = "" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixedInput("pi")
			tc.mod(&in)
			if _, err := s.Launch(in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestResolveOptions(t *testing.T) {
	pi := mustSpec(t, "pi")
	tests := []struct {
		spec    Spec
		given   map[string]string
		want    map[string]string
		wantErr string
	}{
		{pi, nil, map[string]string{"pi-mcp": "extension", "pi-mode": "rpc"}, ""},
		{pi, map[string]string{"pi-mcp": "native"}, map[string]string{"pi-mcp": "native", "pi-mode": "rpc"}, ""},
		{pi, map[string]string{"pi-mcp": "adapter"}, nil, `option pi-mcp: unknown value "adapter" (one of: extension, native)`},
		{pi, map[string]string{"pi-mpc": "native"}, nil, `unknown option "pi-mpc" (known: pi-mcp, pi-mode)`},
		{mustSpec(t, "codex"), map[string]string{"pi-mcp": "native"}, nil, `codex: unknown option "pi-mcp" (it takes none)`},
		{mustSpec(t, "claude-code"), map[string]string{}, map[string]string{}, ""},
	}
	for _, tt := range tests {
		got, err := tt.spec.ResolveOptions(tt.given)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s %v: err = %v, want %q", tt.spec.ID, tt.given, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %v = %v, %v; want %v", tt.spec.ID, tt.given, got, err, tt.want)
		}
	}
	for _, s := range All() {
		for _, o := range s.Options {
			if !contains(o.Values, o.Default) {
				t.Errorf("%s option %s: default %q is not one of %v", s.ID, o.Name, o.Default, o.Values)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestRegistry(t *testing.T) {
	want := []string{"claude-code", "codex", "pi", "deepseek"}
	if got := IDs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("IDs() = %v, want %v", got, want)
	}
	apis := map[string]bool{APIAnthropicMessages: true, APIOpenAIResponses: true, APIOpenAICompletions: true}
	for _, s := range All() {
		got, ok := ByID(s.ID)
		if !ok || got.ID != s.ID {
			t.Errorf("ByID(%q) = %v, %v", s.ID, got.ID, ok)
		}
		if s.Label == "" || s.Launch == nil || s.NewParser == nil || s.Probe.ParseVersion == nil {
			t.Errorf("%s: incomplete spec", s.ID)
		}
		if len(s.Probe.Executables) == 0 || !reflect.DeepEqual(s.Probe.VersionArgs, []string{"--version"}) || s.Probe.Timeout.Seconds() != 10 {
			t.Errorf("%s: probe %+v", s.ID, s.Probe)
		}
		if !apis[s.ModelAPI] {
			t.Errorf("%s: model API %q", s.ID, s.ModelAPI)
		}
	}
	if _, ok := ByID("cursor"); ok {
		t.Error("ByID(cursor) found a spec")
	}
	// All builds fresh values: changing one result cannot change the next.
	a := All()
	a[0].Probe.Executables[0] = "mutated"
	if All()[0].Probe.Executables[0] == "mutated" {
		t.Error("All shares state between calls")
	}
}

func TestParseVersion(t *testing.T) {
	tests := []struct{ spec, stdout, stderr, want string }{
		{"claude-code", "2.1.332 (Claude Code)\n", "", "2.1.332"},
		{"codex", "codex-cli 0.171.0\n", "", "0.171.0"},
		{"pi", "1.6.0\n", "", "1.6.0"},
		{"pi", "", "(node:1) ExperimentalWarning\n1.6.0\n", "1.6.0"},
		{"deepseek", "dsh 0.2.0-rc.1 (fake)\n", "", "0.2.0-rc.1"},
	}
	for _, tt := range tests {
		got, err := mustSpec(t, tt.spec).Probe.ParseVersion(tt.stdout, tt.stderr)
		if err != nil || got != tt.want {
			t.Errorf("%s ParseVersion(%q, %q) = %q, %v; want %q", tt.spec, tt.stdout, tt.stderr, got, err, tt.want)
		}
	}
	if _, err := parseSemver("command not found", "Usage: …"); err == nil {
		t.Error("parseSemver accepted output without a version")
	}
}

func TestPiRPCPromptLine(t *testing.T) {
	in := fixedInput("pi")
	in.Prompt = "line one\nline two \u2028 \"quoted\""
	l, err := mustSpec(t, "pi").Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stdin.Mode != StdinRPC || len(l.Stdin.Lines) != 1 {
		t.Fatalf("stdin = %+v", l.Stdin)
	}
	line := l.Stdin.Lines[0]
	// Pi frames RPC on "\n" only: the command must be one line.
	if bytes.ContainsAny(line, "\n\r") {
		t.Fatalf("rpc line contains a line break: %q", line)
	}
	var cmd map[string]string
	if err := json.Unmarshal(line, &cmd); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "exec-0001", "type": "prompt", "message": in.Prompt}
	if !reflect.DeepEqual(cmd, want) {
		t.Errorf("rpc command = %v, want %v", cmd, want)
	}
	for _, a := range l.Argv {
		if strings.Contains(a, "line one") {
			t.Error("rpc mode puts the prompt in argv")
		}
	}
}

func TestCodexHomeUnderTmpWarns(t *testing.T) {
	in := fixedInput("codex")
	in.Home = "/tmp/sharedos-run-1/home"
	l, err := mustSpec(t, "codex").Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "under /tmp") {
		t.Errorf("warnings = %v", l.Warnings)
	}
}

func TestTOMLString(t *testing.T) {
	tests := map[string]string{
		"http://127.0.0.1:1/mcp": `"http://127.0.0.1:1/mcp"`,
		`a"b\c`:                  `"a\"b\\c"`,
		"tab\tnl\n":              `"tab\u0009nl\u000a"`,
		"ünï":                    `"ünï"`,
	}
	for in, want := range tests {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}
