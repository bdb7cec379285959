package launcher

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

// The turn every op of BenchmarkClaudeTurn runs: one files.read through the bridge,
// then the final text.
const (
	benchPrompt  = "Read the README."
	benchModelID = "claude-sonnet-4-5"
)

func benchScript() scriptedmodel.Script {
	return scriptedmodel.Script{
		Steps: []scriptedmodel.Step{{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)}},
		Final: "read it",
	}
}

// benchWorld is a workspace under /var/tmp (as the end-to-end tests use) with a
// README.md the agent may read.
func benchWorld(b *testing.B) *runconfig.Config {
	b.Helper()
	ws, err := os.MkdirTemp("/var/tmp", "sharedos-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.WriteFile(filepath.Join(ws, "README.md"), []byte("# bench workspace\nread me\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	doc := `workspace: ` + ws + `
stateDir: ` + b.TempDir() + `
context: {namespaceId: bench, actor: "agent:claude-code", authority: bench-host, purpose: bench}
grants:
  - id: read-all
    namespaceId: bench
    subject: "agent:claude-code"
    issuer: bench-host
    issuedAt: "2026-01-01T00:00:00Z"
    capabilities: [{resource: {namespace: files, path: []}, actions: [list, stat, read, search, grep], scope: descendants}]
namespaces: {enabled: [files]}
`
	cfg, err := runconfig.Parse([]byte(doc), ws, runconfig.Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkClaudeTurn: one full scripted Claude Code turn (files.read, then final) per
// op, two ways in the same run:
//
//   - sandboxed: launcher.RunTurn, exactly what `sharedos-run claude-code -- "task"`
//     does (probe, kernel, catalogue, scripted model, sandbox, bridge inside it, the
//     CLI, parse, teardown, record);
//   - direct: the same CLI invocation outside the sandbox: the same kernel, catalogue,
//     scripted model and bridge in process (the bridge on a host loopback listener),
//     the same argv, files and environment from the harness spec, the CLI started
//     with os/exec and its stream fed to the spec's parser.
//
// Both report ms/turn (scripts/bench-turn.sh takes medians and the ratio) and, to
// say where the difference goes, setup-ms/turn (the turn's start until just before
// the CLI is started: for sandboxed, RunTurn's start until the sandbox is ready),
// cli-start-ms/turn (from there until the CLI completed MCP initialize with the
// bridge: Claude's own start-up) and cpu-ms/turn (the CLI's CPU time: the sandbox's
// cgroup, stub included, or the direct child's rusage; the load-independent check on
// whether the CLI works harder inside). The sandboxed run also reports probe-ms/turn
// (`claude --version`, the availability probe every RunTurn runs, part of its setup;
// timed again separately with the timer stopped). Never timed assertions: a turn
// only has to succeed.
func BenchmarkClaudeTurn(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the sandboxed turn needs root (CI is root)")
	}
	spec, ok := harnessspec.ByID("claude-code")
	if !ok {
		b.Fatal("no claude-code spec")
	}
	inst, err := Probe(context.Background(), spec, repoPrefixes())
	if err != nil {
		b.Skipf("%v (scripts/install-harnesses.sh installs the pinned CLI)", err)
	}
	script := benchScript()

	b.Run("sandboxed", func(b *testing.B) {
		cfg := benchWorld(b)
		var setup, startup, cpu, probe time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			var ready time.Time
			rec, err := RunTurn(context.Background(), TurnRequest{
				Spec: spec, Config: cfg, Prompt: benchPrompt,
				Model:    ModelSeat{Script: &script, ID: benchModelID},
				Sandbox:  sandbox.Spec{Timeout: 150 * time.Second, Grace: 5 * time.Second},
				Prefixes: repoPrefixes(), Version: "bench",
				Started: func(*sandbox.Sandbox) { ready = time.Now() },
			})
			if err != nil {
				b.Fatal(err)
			}
			if rec.Execution.Status != StatusSucceeded {
				b.Fatalf("status %s: %s (errors %v)", rec.Execution.Status, rec.Execution.Reason, rec.Execution.Errors)
			}
			if len(rec.Execution.Operations) != 1 || rec.Execution.Operations[0].Tool != "files.read" || rec.Execution.Operations[0].Outcome != "succeeded" {
				b.Fatalf("operations %+v, want one successful files.read", rec.Execution.Operations)
			}
			setup += ready.Sub(start)
			startup += firstInitialize(rec.Execution.Bridge.Events).Sub(ready)
			cpu += time.Duration(rec.Sandbox.CPUTimeMs * float64(time.Millisecond))
			b.StopTimer()
			p := time.Now()
			if _, err := Probe(context.Background(), spec, repoPrefixes()); err != nil {
				b.Fatal(err)
			}
			probe += time.Since(p)
			b.StartTimer()
		}
		reportTurn(b, setup, startup, cpu, probe)
	})

	b.Run("direct", func(b *testing.B) {
		cfg := benchWorld(b)
		var setup, startup, cpu time.Duration
		for i := 0; i < b.N; i++ {
			d, err := directTurn(context.Background(), spec, inst, cfg, script)
			if err != nil {
				b.Fatal(err)
			}
			setup += d.setup
			startup += d.startup
			cpu += d.cpu
		}
		reportTurn(b, setup, startup, cpu, 0)
	})
}

func reportTurn(b *testing.B, setup, startup, cpu, probe time.Duration) {
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/n, "ms/turn")
	b.ReportMetric(float64(setup.Microseconds())/1000/n, "setup-ms/turn")
	b.ReportMetric(float64(startup.Microseconds())/1000/n, "cli-start-ms/turn")
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/turn")
	if probe > 0 {
		b.ReportMetric(float64(probe.Microseconds())/1000/n, "probe-ms/turn")
	}
	b.ReportMetric(0, "ns/op") // ms/turn says it; ns/op would say it again
}

// firstInitialize is when the CLI completed MCP initialize with the bridge.
func firstInitialize(events []bridge.Event) time.Time {
	for _, e := range events {
		if e.Kind == bridge.EventInitialize {
			return e.Time
		}
	}
	panic("no initialize event in a successful turn")
}

// directTimes are one direct turn's phases.
type directTimes struct {
	setup   time.Duration // the turn's start until just before the exec
	startup time.Duration // the exec until the CLI completed MCP initialize with the bridge
	cpu     time.Duration // the CLI's CPU time (user + system, its reaped children included)
}

// directTurn is one turn of the CLI outside the sandbox, built as RunTurn builds it.
// An error means the turn did not succeed.
func directTurn(ctx context.Context, spec harnessspec.Spec, inst Installed, cfg *runconfig.Config, script scriptedmodel.Script) (times directTimes, err error) {
	start := time.Now()
	auth, err := NewAuthority(ctx, cfg)
	if err != nil {
		return times, err
	}
	defer auth.Close()
	turn, err := auth.Kernel.BeginTurn(ctx, cfg.Context, cfg.Budgets)
	if err != nil {
		return times, err
	}
	execID := NewExecutionID()
	cat, err := EffectiveCatalog(ctx, turn, execID)
	if err != nil {
		return times, err
	}
	modelSrv, model, _, err := startScriptedModel(script, benchModelID, nil)
	if err != nil {
		return times, err
	}
	defer modelSrv.Close()

	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := bridge.New(bridge.Options{Catalog: cat, Turn: turn, TraceID: execID, Secret: secret, Version: "bench"})
	if err != nil {
		return times, err
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return times, err
	}
	go srv.Serve(l)
	token, err := srv.Token(time.Now().Add(time.Hour))
	if err != nil {
		return times, err
	}

	// The sandbox's scratch layout: HOME, TMPDIR and the work directory in one root.
	root, err := os.MkdirTemp("/var/tmp", "sharedos-bench-direct-")
	if err != nil {
		return times, err
	}
	defer os.RemoveAll(root)
	home, tmp, work := filepath.Join(root, "home"), filepath.Join(root, "tmp"), filepath.Join(root, "work")
	for _, d := range []string{home, tmp, work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return times, err
		}
	}
	in := harnessspec.LaunchInput{
		Prompt: benchPrompt, ExecutionID: execID, TokenEnv: tokenEnv,
		BridgeURL: fmt.Sprintf("http://%s%s", l.Addr().(*net.TCPAddr).AddrPort(), bridge.Path),
		Home:      home, WorkDir: work, Executable: inst.Executable, Prefix: inst.Prefix,
		Model: model,
	}
	launch, err := spec.Launch(in)
	if err != nil {
		return times, err
	}
	if err := writeLaunchFiles(launch); err != nil {
		return times, err
	}
	// The environment the sandbox would give (sandbox/env.go without the proxy
	// variables, which a bridge-only run does not set) plus the harness's own.
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	env := []string{
		"PATH=" + path, "HOME=" + home, "TMPDIR=" + tmp,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	harnessEnv, err := launchEnv(launch, sandbox.Spec{}, tokenEnv+"="+token, []string{ScriptedModelKeyEnv + "=scripted-model-no-key"})
	if err != nil {
		return times, err
	}
	env = append(env, harnessEnv...)

	ctx, cancel := context.WithTimeout(ctx, 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, launch.Argv[0], launch.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdin = env, work, nil // nil stdin: /dev/null
	var stderr tailBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return times, err
	}
	times.setup = time.Since(start)
	execAt := time.Now()
	if err := cmd.Start(); err != nil {
		return times, err
	}
	parser := spec.NewParser(in)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		parser.Feed(sc.Bytes())
	}
	waitErr := cmd.Wait()
	srv.Close()

	o := parser.Outcome()
	if !o.Done || o.Failed {
		return times, fmt.Errorf("turn not succeeded (done %v, failed %v, exit %v): errors %v; stderr %s", o.Done, o.Failed, waitErr, o.Errors, stderr.String())
	}
	var calls []string
	for _, e := range srv.Events() {
		if e.Kind == bridge.EventCall {
			calls = append(calls, e.Tool+":"+e.Decision)
		}
	}
	if len(calls) != 1 || calls[0] != "files.read:succeeded" {
		return times, fmt.Errorf("bridge calls %v, want one successful files.read", calls)
	}
	times.startup = firstInitialize(srv.Events()).Sub(execAt)
	times.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return times, nil
}
