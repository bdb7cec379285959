package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestDryRunGolden: --dry-run prints what each harness launch would be (argv,
// environment names, files, policy, catalogHash) and starts nothing. The harnesses
// are made unavailable (empty PATH and prefix) so that the output is the same on
// every machine; the fake dsh stands in for DeepSeek.
func TestDryRunGolden(t *testing.T) {
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	fakeDsh := filepath.Join(repo, "harnessspec", "testdata", "fake-dsh")
	emptyDir := t.TempDir()
	t.Setenv("SHAREDOS_HARNESS_PREFIX", emptyDir)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := filepath.Join(repo, "testdata", "example", "workspace")
	cases := []struct {
		name string
		path string
		args []string
	}{
		{"claude-code", emptyDir, []string{"claude-code"}},
		{"codex", emptyDir, []string{"codex"}},
		{"pi-extension", emptyDir, []string{"pi", "--pi-mcp", "extension"}},
		{"pi-native", emptyDir, []string{"pi", "--pi-mcp", "native"}},
		{"deepseek-fake-dsh", fakeDsh, []string{"deepseek"}},
		{"claude-code-read-only-extra-args", emptyDir, []string{"claude-code", "--read-only", "--pass-env", "MY_TOKEN"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			args := append(append([]string{}, tc.args...), "--dry-run", "--json", "--workspace", ws, "--", "Fix the failing test", "--extra-harness-arg")
			r := runCLI(t, "", args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := strings.NewReplacer(repo, "<repo>", emptyDir, "<empty>").Replace(r.stdout)
			var plan map[string]any
			if err := json.Unmarshal([]byte(got), &plan); err != nil {
				t.Fatalf("dry run is not JSON: %v\n%s", err, got)
			}
			// Where the harness was looked for depends on the test binary's location.
			got = searchedWhere.ReplaceAllString(got, `"availability": "not available: no $1 executable (searched the prefixes and PATH)"`)
			golden := filepath.Join("testdata", "dryrun", tc.name+".json")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("dry run differs from %s (run with -update after checking):\n%s", golden, got)
			}
			if strings.Contains(got, "Bearer ") {
				t.Fatal("a token value in the dry run")
			}
		})
	}
}

var searchedWhere = regexp.MustCompile(`"availability": "not available: no (\S+) executable [^"]*"`)

func TestDeepseekNotAvailable(t *testing.T) {
	t.Setenv("SHAREDOS_HARNESS_PREFIX", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	r := runCLI(t, "", "deepseek", "--workspace", t.TempDir(), "--", "task")
	if r.code != exitNotAvailable || !strings.Contains(r.stderr, "not available") || !strings.Contains(r.stderr, "dsh") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

func TestHarnessUsage(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	for _, args := range [][]string{
		{"claude-code", "--workspace", ws},                                                     // no task
		{"pi", "--pi-mcp", "telepathy", "--workspace", ws, "--", "task"},                       // bad option value
		{"codex", "--model", "gpt-x", "--workspace", ws, "--", "task"},                         // live model without provider
		{"codex", "--model", "gpt-x", "--provider", "openai", "--workspace", ws, "--", "task"}, // without key variable
		{"claude-code", "--memory", "lots", "--workspace", ws, "--", "task"},
	} {
		if r := runCLI(t, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, r.code, exitUsage, r.stderr)
		}
	}
}
