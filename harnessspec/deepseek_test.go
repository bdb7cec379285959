package harnessspec

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// The patch file, byte for byte as harnesses.md gives it.
func TestDeepseekPatchBytes(t *testing.T) {
	in := fixedInput("dsh")
	l, err := mustSpec(t, "deepseek").Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `- insert:
    - id: mcp-sharedos
      name: '@deepseek-ai/dsh-mcp-client'
      config:
        serverName: sharedos
        transport: streamable-http
        url: "http://127.0.0.1:41234/mcp"
        headers:
          Authorization: "Bearer ${SHAREDOS_MCP_TOKEN}"
        failOnStartupError: true
        toolCallTimeoutMs: 120000
`
	if len(l.Files) != 1 {
		t.Fatalf("files = %d, want the patch only", len(l.Files))
	}
	f := l.Files[0]
	if f.Path != in.Home+"/cordis.patch.yml" {
		t.Errorf("patch path %s", f.Path)
	}
	if string(f.Content) != want {
		t.Errorf("patch file:\n%s\nwant:\n%s", f.Content, want)
	}
	wantArgv := []string{in.Executable, "--profile", "headless", "--patch", in.Home + "/cordis.patch.yml", in.Prompt}
	if !reflect.DeepEqual(l.Argv, wantArgv) {
		t.Errorf("argv = %q, want %q", l.Argv, wantArgv)
	}
	if l.Stdin.Mode != StdinDevNull {
		t.Errorf("stdin %q", l.Stdin.Mode)
	}
	if !reflect.DeepEqual(l.DeclaredLocalTools, []string{"apply_patch", "shell"}) {
		t.Errorf("declared local tools %v", l.DeclaredLocalTools)
	}
	// A quote in the URL cannot break out of the YAML scalar.
	if got := string(dshPatch(`http://127.0.0.1:1/mcp"x`, "T")); !strings.Contains(got, `url: "http://127.0.0.1:1/mcp\"x"`) {
		t.Errorf("unescaped URL:\n%s", got)
	}
}

func fakeDsh(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	p, err := filepath.Abs(filepath.Join("testdata", "fake-dsh", "dsh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// materialize does what the launcher does with a Launch before starting it:
// directories, then files.
func materialize(t *testing.T, l Launch) {
	t.Helper()
	for _, d := range l.Dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range l.Files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.Path, f.Content, os.FileMode(f.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts the launch's argv the way the launcher would (stdin /dev/null,
// a clean environment: the spec's variables plus the token), and parses its
// stdout with the spec's parser. The exit status is returned but, as for the
// real CLIs, the judgement comes from the stream.
func run(t *testing.T, s Spec, in LaunchInput, l Launch, extraEnv ...string) (Outcome, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.Argv[0], l.Argv[1:]...)
	cmd.Dir = in.WorkDir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + in.Home}
	if in.TokenEnv != "" {
		cmd.Env = append(cmd.Env, in.TokenEnv+"=tok-test-secret")
	}
	for k, v := range l.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // Stdin nil = /dev/null
	err := cmd.Run()
	p := s.NewParser(in)
	for _, line := range bytes.Split(stdout.Bytes(), []byte("\n")) {
		p.Feed(line)
	}
	return p.Outcome(), stderr.String(), err
}

func fakeInput(t *testing.T, exe string) LaunchInput {
	root := t.TempDir()
	in := fixedInput("dsh")
	in.Executable = exe
	in.Home = filepath.Join(root, "home")
	in.WorkDir = filepath.Join(root, "work")
	for _, d := range []string{in.Home, in.WorkDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

func TestDeepseekAgainstFakeDsh(t *testing.T) {
	exe := fakeDsh(t)
	s := mustSpec(t, "deepseek")
	tests := []struct {
		name    string
		prompt  string
		env     []string
		tamper  func([]byte) []byte
		done    bool
		failed  bool
		reason  string
		final   string
		errPart string
	}{
		{name: "completed", done: true, reason: "completed", final: "FAKE-DSH: done (prompt of 30 bytes)"},
		{name: "prompt that looks like a flag", prompt: "--version please", done: true, reason: "completed", final: "FAKE-DSH: done (prompt of 16 bytes)"},
		{name: "model error", env: []string{"FAKE_DSH_OUTCOME=error"}, done: true, failed: true, reason: "error", errPart: "503"},
		{name: "aborted", env: []string{"FAKE_DSH_OUTCOME=aborted"}, done: true, failed: true, reason: "aborted", final: "partial"},
		{name: "truncated", env: []string{"FAKE_DSH_OUTCOME=truncated"}, final: "partial"},
		// The bare-id form dsh ignores: the fake boots "without the client"
		// and exits 0; only the stream says the turn failed.
		{name: "patch without insert", tamper: func(b []byte) []byte {
			b = bytes.Replace(b, []byte("- insert:\n    - id:"), []byte("- id:"), 1)
			return b
		}, done: true, failed: true, reason: "error", errPart: "not the insert: shape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := fakeInput(t, exe)
			if tt.prompt != "" {
				in.Prompt = tt.prompt
			}
			l, err := s.Launch(in)
			if err != nil {
				t.Fatal(err)
			}
			if tt.tamper != nil {
				l.Files[0].Content = tt.tamper(l.Files[0].Content)
			}
			materialize(t, l)
			got, stderr, err := run(t, s, in, l, tt.env...)
			if err != nil {
				t.Fatalf("fake dsh: %v\n%s", err, stderr)
			}
			if got.Done != tt.done || got.Failed != tt.failed || got.TerminalReason != tt.reason || got.FinalText != tt.final {
				t.Errorf("outcome %+v\nwant done=%v failed=%v reason=%q final=%q\nstderr: %s", got, tt.done, tt.failed, tt.reason, tt.final, stderr)
			}
			if tt.errPart != "" && !strings.Contains(strings.Join(got.Errors, "\n"), tt.errPart) {
				t.Errorf("errors %q, want one containing %q", got.Errors, tt.errPart)
			}
		})
	}
}

// The fake expands the token variable the patch names, as dsh would: without
// it in the environment the turn fails, which shows the token travels by
// variable only.
func TestDeepseekFakeNeedsTokenVariable(t *testing.T) {
	exe := fakeDsh(t)
	s := mustSpec(t, "deepseek")
	in := fakeInput(t, exe)
	l, err := s.Launch(in)
	if err != nil {
		t.Fatal(err)
	}
	materialize(t, l)
	in.TokenEnv = "" // run() then sets no token variable
	got, _, err := run(t, s, in, l)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Done || !got.Failed || !strings.Contains(strings.Join(got.Errors, ""), "token variable") {
		t.Errorf("outcome %+v", got)
	}
}

func TestDeepseekProbeAgainstFakeDsh(t *testing.T) {
	exe := fakeDsh(t)
	probe := mustSpec(t, "deepseek").Probe
	ctx, cancel := context.WithTimeout(context.Background(), probe.Timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, probe.VersionArgs...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	v, err := probe.ParseVersion(stdout.String(), stderr.String())
	if err != nil || v != "0.2.0-rc.1" {
		t.Errorf("version %q, %v", v, err)
	}
	if !reflect.DeepEqual(probe.Executables, []string{"dsh"}) {
		t.Errorf("executables %v", probe.Executables)
	}
}

// The fake refuses any argv but the specified one, so extra harness args and
// a reordered launch would be caught here.
func TestFakeDshRefusesOtherArgv(t *testing.T) {
	exe := fakeDsh(t)
	for _, args := range [][]string{
		{"--profile", "default", "--patch", "/dev/null", "x"},
		{"--patch", "/dev/null", "--profile", "headless", "x"},
		{"--profile", "headless", "--patch", "/dev/null", "a", "b"},
	} {
		out, err := exec.Command(exe, args...).CombinedOutput()
		if err == nil {
			t.Errorf("fake dsh accepted %q: %s", args, out)
		}
	}
	names := []string{}
	for _, s := range All() {
		names = append(names, s.Probe.Executables...)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"claude", "codex", "dsh", "pi"}) {
		t.Errorf("executables %v", names)
	}
}
