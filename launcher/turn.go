package launcher

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

// ScriptedModelKeyEnv carries the placeholder key a harness needs to talk to the
// scripted model (the CLIs refuse to start without one).
const ScriptedModelKeyEnv = "SHAREDOS_MODEL_KEY"

// ModelSeat is who answers the harness: the scripted model, or a live provider.
type ModelSeat struct {
	// Script, when set, makes the seat the scripted model server on host loopback.
	Script *scriptedmodel.Script
	// ID and Provider name the model (recorded; passed to the CLI when set).
	ID, Provider string
	// BaseURL is a live provider's endpoint root (without /v1), "" for the CLI's own.
	BaseURL string
	// KeyEnv names the variable holding a live provider's key; it must be passed
	// through with the sandbox's PassEnv.
	KeyEnv string
}

// TurnRequest is one harness turn.
type TurnRequest struct {
	Spec      harnessspec.Spec
	Options   map[string]string
	Config    *runconfig.Config
	Prompt    string
	ExtraArgs []string
	Model     ModelSeat
	// Sandbox carries the run's limits, timeout, grace, egress and pass-through
	// variables; the launcher adds the bridge listener, the model mirror, the
	// prefix's visibility and the command.
	Sandbox sandbox.Spec
	// Providers add tools for this turn (a brokered MCP server, say).
	Providers []kernel.Provider
	Prefixes  []string
	Version   string
	Logger    *slog.Logger
	Signals   <-chan os.Signal
	// HarnessStderr receives the harness's stderr as it comes (nil: kept only in
	// the record's tail).
	HarnessStderr io.Writer
	// Started, when set, is called once the sandbox is ready.
	Started func(*sandbox.Sandbox)
}

// tokenEnv is the variable the harness reads its bearer token from.
const tokenEnv = EnvMCPToken

// PromptHash is SharedOS's promptHash: SHA-256 of canonical {instructions, prompt}.
func PromptHash(prompt string, instructions *string) (string, error) {
	return canonjson.HashValue(struct {
		Instructions *string `json:"instructions"`
		Prompt       string  `json:"prompt"`
	}{instructions, prompt})
}

// RunTurn runs one turn end to end and returns its execution record. An error means
// the turn could not start (bad input, harness not available, sandbox impossible);
// everything after the harness starts is in the record.
func RunTurn(ctx context.Context, r TurnRequest) (*Record, error) {
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	started := time.Now()
	options, err := r.Spec.ResolveOptions(r.Options)
	if err != nil {
		return nil, err
	}
	inst, err := Probe(ctx, r.Spec, r.Prefixes)
	if err != nil {
		return nil, err
	}
	cfg := r.Config
	promptHash, err := PromptHash(r.Prompt, nil)
	if err != nil {
		return nil, err
	}
	execID := NewExecutionID()
	opened, err := OpenTurn(ctx, cfg, execID, r.Providers...)
	if err != nil {
		return nil, err
	}
	defer opened.Close()
	turn, cat := opened.Turn, opened.Catalog

	// A launch built with placeholder paths tells the strict check what the harness
	// will have before anything starts.
	probeLaunch, err := r.Spec.Launch(launchInput(r, options, inst, modelPlaceholder(r.Model), "exec-probe", "http://127.0.0.1:1/mcp", "/nonexistent/home", "/nonexistent/work"))
	if err != nil {
		return nil, err
	}
	toolPolicy := EffectivePolicy(cfg, probeLaunch)
	policyHash, err := toolPolicy.Hash()
	if err != nil {
		return nil, err
	}
	rec := &Record{RecordVersion: RecordVersion}
	rec.Identity = RecordIdentity{
		SharedosRun: r.Version, Harness: r.Spec.Label, HarnessVersion: inst.Version, SpecID: r.Spec.ID, Options: options,
		ModelID: r.Model.ID, Provider: r.Model.Provider, ToolPolicy: toolPolicy, PolicyHash: policyHash,
		CatalogHash: cat.CatalogHash, ToolCount: len(cat.Tools), PromptHash: promptHash,
	}
	rec.Execution.ExecutionID = execID
	for _, t := range cat.Tools {
		rec.Execution.ExposedTools = append(rec.Execution.ExposedTools, t.Name)
	}
	rec.Cost.StartedAt = started

	// The model seat.
	spec := r.Sandbox
	model := harnessspec.Model{ID: r.Model.ID, Provider: r.Model.Provider, BaseURL: r.Model.BaseURL, APIKeyEnv: r.Model.KeyEnv}
	var modelSrv *scriptedmodel.Server
	extraEnv := []string{}
	if r.Model.Script != nil {
		var port int
		modelSrv, model, port, err = startScriptedModel(*r.Model.Script, r.Model.ID, logger)
		if err != nil {
			return nil, err
		}
		defer modelSrv.Close()
		spec.AllowLoopback = append(append([]int(nil), spec.AllowLoopback...), port)
		extraEnv = append(extraEnv, ScriptedModelKeyEnv+"=scripted-model-no-key")
		rec.Model = RecordModel{Scripted: true, BaseURL: model.BaseURL}
		rec.Identity.ModelID, rec.Identity.Provider = model.ID, "scripted"
	} else {
		rec.Model.BaseURL = r.Model.BaseURL
	}

	rec.Identity.MCPSupport, rec.Identity.MCPExtension, rec.Identity.MCPExtensionVersion = probeLaunch.MCPSupport, probeLaunch.MCPExtension, probeLaunch.MCPExtensionVersion
	rec.Execution.LocalTools.Declared = nonNil(probeLaunch.DeclaredLocalTools)
	if extra := beyondPolicy(toolPolicy, probeLaunch.DeclaredLocalTools); len(extra) > 0 {
		rec.Execution.LocalTools.Extra = extra
		finishRefused(rec, fmt.Sprintf("the strict tool policy does not declare the harness-local tools this launch leaves: %s (add them to toolPolicy.harnessLocal, or use mode hybrid)", strings.Join(extra, ", ")))
		return rec, nil
	}

	// The sandbox, with the bridge listener inside.
	spec.Listeners = append(append([]string(nil), spec.Listeners...), bridgeListener)
	if inst.Prefix != "" {
		spec.Visible = append(append([]string(nil), spec.Visible...), inst.Prefix)
	} else {
		spec.Visible = append(append([]string(nil), spec.Visible...), filepath.Dir(inst.Executable))
	}
	stdoutR, stdoutW := io.Pipe()
	var stderrTail tailBuffer
	spec.Stdout = stdoutW
	spec.Stderr = &stderrTail
	if r.HarnessStderr != nil {
		spec.Stderr = io.MultiWriter(&stderrTail, r.HarnessStderr)
	}
	var stdinW *io.PipeWriter
	if probeLaunch.Stdin.Mode == harnessspec.StdinRPC {
		var stdinR *io.PipeReader
		stdinR, stdinW = io.Pipe()
		spec.Stdin = stdinR
	} else {
		spec.Stdin = nil
	}
	spec.Logger = logger
	spec.Command = nil
	sb, err := sandbox.Start(ctx, spec)
	if err != nil {
		return nil, &SandboxError{Err: err}
	}
	rec.Sandbox.CgroupMode, rec.Sandbox.CgroupWarning = sb.CgroupMode(), sb.CgroupWarning()
	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := bridge.New(bridge.Options{Catalog: cat, Turn: turn, TraceID: execID, Secret: secret, Version: r.Version, Logger: logger})
	if err != nil {
		sb.Kill()
		sb.Wait()
		return nil, err
	}
	l := sb.Listener(bridgeListener)
	go srv.Serve(l)
	defer srv.Close()
	token, err := srv.Token(time.Now().Add(tokenLifetime(spec)))
	if err != nil {
		sb.Kill()
		sb.Wait()
		return nil, err
	}
	bridgeURL := fmt.Sprintf("http://%s%s", l.Addr().(*net.TCPAddr).AddrPort(), bridge.Path)
	in := launchInput(r, options, inst, model, execID, bridgeURL, sb.Home(), sb.WorkDir())
	launch, err := r.Spec.Launch(in)
	if err != nil {
		sb.Kill()
		sb.Wait()
		return nil, err
	}
	if err := writeLaunchFiles(launch); err != nil {
		sb.Kill()
		sb.Wait()
		return nil, err
	}
	env, err := launchEnv(launch, spec, tokenEnv+"="+token, extraEnv)
	if err != nil {
		sb.Kill()
		sb.Wait()
		return nil, err
	}
	rec.Execution.Warnings = append(rec.Execution.Warnings, launch.Warnings...)
	if r.Started != nil {
		r.Started(sb)
	}

	// Read the stream: feed the parser, close stdin when it says so, and stop the
	// turn at once when the harness reports local tools a strict policy forbids.
	parser := r.Spec.NewParser(in)
	var parseMu sync.Mutex
	var policyExtra []string
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		sc := bufio.NewScanner(stdoutR)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			parseMu.Lock()
			sig := parser.Feed(sc.Bytes())
			measured := parser.Outcome().LocalTools
			parseMu.Unlock()
			if sig.CloseStdin && stdinW != nil {
				stdinW.Close()
			}
			if measured != nil && policyExtra == nil {
				if extra := beyondPolicy(toolPolicy, measured); len(extra) > 0 {
					parseMu.Lock()
					policyExtra = extra
					parseMu.Unlock()
					sb.Kill()
				}
			}
		}
		io.Copy(io.Discard, stdoutR)
	}()
	stopSignals := forwardSignals(r.Signals, sb)
	if err := sb.GoCommand(launch.Argv, env...); err != nil {
		logger.Error("starting the harness", "err", err)
	}
	if stdinW != nil {
		go func() {
			for _, line := range launch.Stdin.Lines {
				if _, err := stdinW.Write(append(append([]byte(nil), line...), '\n')); err != nil {
					return
				}
			}
		}()
	}
	out := sb.Wait()
	stopSignals()
	stdoutW.Close()
	if stdinW != nil {
		stdinW.Close()
	}
	<-streamDone
	srv.Close()

	parseMu.Lock()
	outcome := parser.Outcome()
	extra := policyExtra
	parseMu.Unlock()
	fillRecord(rec, out, outcome, srv, cat, spec, modelSrv, stderrTail.String())
	// After the record has the turn's own events: the knock is not an operation.
	rec.Execution.Bridge.LateCall = probeLateCall(srv, token)
	rec.Execution.LocalTools.Measured = outcome.LocalTools
	switch {
	case len(extra) > 0:
		rec.Execution.LocalTools.Extra = extra
		rec.Execution.Status = StatusPolicyRefused
		rec.Execution.Reason = fmt.Sprintf("the harness reported harness-local tools the strict tool policy does not declare: %s; the turn was stopped", strings.Join(extra, ", "))
	case out.TimedOut:
		rec.Execution.Status, rec.Execution.Reason = StatusTimeout, "the turn's --timeout expired"
	case out.Err != nil && out.ExitCode < 0:
		rec.Execution.Status, rec.Execution.Reason = StatusSandboxFailed, out.Err.Error()
	case !srv.Initialized() || !srv.Listed():
		rec.Execution.Status = StatusDeclinedCatalogue
		rec.Execution.Reason = "the harness never initialized with the bridge or never listed the catalogue"
	case !outcome.Done:
		rec.Execution.Status, rec.Execution.Reason = StatusFailed, fmt.Sprintf("the harness's stream ended without a terminal event (exit %d)", out.ExitCode)
	case outcome.Failed:
		rec.Execution.Status, rec.Execution.Reason = StatusFailed, "the harness reported a failed turn"
	default:
		rec.Execution.Status = StatusSucceeded
	}
	return rec, nil
}

// probeLateCall knocks on the closed bridge with the turn's own token, as a harness
// process that outlived the turn would: the answer must be a refusal, never a
// catalogue or a result. (The listener itself died with the sandbox's network
// namespace, so from inside, the next connection is refused outright.)
func probeLateCall(srv *bridge.Server, token string) RecordLateCall {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.list","arguments":{"path":[]}}}`
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+bridge.Path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	answer := strings.TrimSpace(rec.Body.String())
	refused := rec.Code != http.StatusOK || !strings.Contains(answer, `"isError":false`) && !strings.Contains(answer, `"tools":[`)
	return RecordLateCall{Refused: refused, HTTPStatus: rec.Code, Answer: capText(answer, 300)}
}

func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func launchInput(r TurnRequest, options map[string]string, inst Installed, model harnessspec.Model, execID, bridgeURL, home, work string) harnessspec.LaunchInput {
	return harnessspec.LaunchInput{
		Prompt: r.Prompt, ExecutionID: execID, BridgeURL: bridgeURL, TokenEnv: tokenEnv,
		Home: home, WorkDir: work, Executable: inst.Executable, Prefix: inst.Prefix,
		Model: model, Options: options, ExtraArgs: r.ExtraArgs,
	}
}

// startScriptedModel serves the script on host loopback; the sandbox mirrors the port
// inside under the same number, so the URL is the same on both sides.
func startScriptedModel(script scriptedmodel.Script, modelID string, logger *slog.Logger) (*scriptedmodel.Server, harnessspec.Model, int, error) {
	if modelID == "" {
		modelID = scriptedmodel.DefaultModelID
	}
	srv, err := scriptedmodel.New(scriptedmodel.Options{Script: script, ModelID: modelID, Logger: logger})
	if err != nil {
		return nil, harnessspec.Model{}, 0, fmt.Errorf("scripted model: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, harnessspec.Model{}, 0, fmt.Errorf("scripted model: %w", err)
	}
	go srv.Serve(l)
	port := l.Addr().(*net.TCPAddr).Port
	return srv, harnessspec.Model{ID: modelID, Provider: "scripted", BaseURL: "http://" + l.Addr().String(), APIKeyEnv: ScriptedModelKeyEnv}, port, nil
}

// EffectivePolicy is the run's ToolPolicy: the configuration's when it declares one;
// otherwise strict, managed "sharedos", with exactly the local tools this launch
// leaves declared — so that a harness reporting more than its launch promised is
// still stopped.
func EffectivePolicy(cfg *runconfig.Config, l harnessspec.Launch) policy.ToolPolicy {
	if cfg.ToolPolicyDeclared {
		return cfg.ToolPolicy
	}
	p := cfg.ToolPolicy
	p.HarnessLocal = append([]string{}, l.DeclaredLocalTools...)
	return p
}

// modelPlaceholder is the seat as the harness would address it, before the scripted
// model has a port.
func modelPlaceholder(m ModelSeat) harnessspec.Model {
	if m.Script != nil {
		return harnessspec.Model{ID: m.ID, Provider: "scripted", BaseURL: "http://127.0.0.1:2", APIKeyEnv: ScriptedModelKeyEnv}
	}
	return harnessspec.Model{ID: m.ID, Provider: m.Provider, BaseURL: m.BaseURL, APIKeyEnv: m.KeyEnv}
}

// beyondPolicy lists the local tools a strict policy does not declare (nil under
// hybrid, which lets the harness keep its own tools).
func beyondPolicy(p policy.ToolPolicy, tools []string) []string {
	if p.Mode != policy.ModeStrict {
		return nil
	}
	var extra []string
	for _, t := range tools {
		if !slices.Contains(p.HarnessLocal, t) {
			extra = append(extra, t)
		}
	}
	sort.Strings(extra)
	return extra
}

func finishRefused(rec *Record, reason string) {
	rec.Execution.Status, rec.Execution.Reason = StatusPolicyRefused, reason
	rec.Execution.Operations = []RecordOperation{}
	rec.Execution.HarnessToolCalls = []RecordHarnessCall{}
	rec.Execution.Bridge.Events = []bridge.Event{}
	rec.Sandbox.Violations = []sandbox.Violation{}
	rec.Cost.EndedAt = time.Now()
	rec.Cost.ElapsedMs = millis(rec.Cost.EndedAt.Sub(rec.Cost.StartedAt))
}

// writeLaunchFiles creates the spec's directories and files in the scratch area.
func writeLaunchFiles(l harnessspec.Launch) error {
	for _, d := range l.Dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("preparing the harness: %w", err)
		}
	}
	for _, f := range l.Files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return fmt.Errorf("preparing the harness: %w", err)
		}
		mode := os.FileMode(f.Mode)
		if mode == 0 {
			mode = 0o600
		}
		if err := os.WriteFile(f.Path, f.Content, mode); err != nil {
			return fmt.Errorf("preparing the harness: %w", err)
		}
	}
	return nil
}

// launchEnv is the harness's environment on top of the sandbox's own: the spec's
// variables, variables copied by name (EnvFrom), PATH with the spec's prefix first,
// the token, and the extras.
func launchEnv(l harnessspec.Launch, spec sandbox.Spec, token string, extra []string) ([]string, error) {
	var env []string
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+l.Env[k])
	}
	lookup := func(name string) (string, bool) {
		for _, kv := range extra {
			if k, v, ok := strings.Cut(kv, "="); ok && k == name {
				return v, true
			}
		}
		if slices.Contains(spec.PassEnv, name) {
			return os.LookupEnv(name)
		}
		return "", false
	}
	for to, from := range l.EnvFrom {
		v, ok := lookup(from)
		if !ok {
			return nil, fmt.Errorf("the harness needs %s, taken from %s, which the run does not pass (--pass-env %s)", to, from, from)
		}
		env = append(env, to+"="+v)
	}
	if len(l.PathPrefix) > 0 {
		env = append(env, "PATH="+strings.Join(l.PathPrefix, ":")+":/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin")
	}
	env = append(env, extra...)
	env = append(env, token)
	return env, nil
}

func fillRecord(rec *Record, out sandbox.Outcome, o harnessspec.Outcome, srv *bridge.Server, cat bridge.Catalog, spec sandbox.Spec, modelSrv *scriptedmodel.Server, stderr string) {
	rec.Execution.TerminalReason = o.TerminalReason
	rec.Execution.OutputText = o.FinalText
	rec.Execution.Errors = append(rec.Execution.Errors, o.Errors...)
	rec.Execution.Warnings = append(rec.Execution.Warnings, o.Warnings...)
	if !o.Done && stderr != "" {
		rec.Execution.Errors = append(rec.Execution.Errors, "stderr tail: "+stderr)
	}
	events := srv.Events()
	rec.Execution.Bridge = RecordBridge{Initialized: srv.Initialized(), Listed: srv.Listed(), Events: nonNilEvents(events)}
	rec.Execution.Operations = []RecordOperation{}
	for _, e := range events {
		switch e.Kind {
		case bridge.EventInitialize:
			rec.Execution.Bridge.Clients = append(rec.Execution.Bridge.Clients, e.Client)
		case bridge.EventCall:
			rec.Execution.Operations = append(rec.Execution.Operations, RecordOperation{
				CallID: e.CallID, Tool: e.Tool, Alias: e.Alias, Resource: nonNil(e.Resource), Action: e.Action,
				Outcome: e.Decision, Code: e.Code, Message: e.Message, StartedAt: e.Time, DurationMs: e.DurationMillis,
			})
		}
	}
	rec.Execution.HarnessToolCalls = []RecordHarnessCall{}
	for _, c := range o.ToolCalls {
		rec.Execution.HarnessToolCalls = append(rec.Execution.HarnessToolCalls, RecordHarnessCall{Name: c.Name, Server: c.Server, Tool: c.Tool, Status: c.Status})
	}
	rec.Sandbox.Limits = spec.Limits
	if rec.Sandbox.Limits.Pids == 0 {
		rec.Sandbox.Limits.Pids = sandbox.DefaultPids
	}
	rec.Sandbox.PeakMemory, rec.Sandbox.PeakTasks, rec.Sandbox.OOMKills = out.Stats.PeakMemory, out.Stats.PeakTasks, out.Stats.OOMKills
	rec.Sandbox.CPUTimeMs = millis(out.Stats.CPUTime)
	rec.Sandbox.Violations = out.Violations
	if rec.Sandbox.Violations == nil {
		rec.Sandbox.Violations = []sandbox.Violation{}
	}
	rec.Sandbox.ExitCode, rec.Sandbox.Signal, rec.Sandbox.TimedOut, rec.Sandbox.Killed = out.ExitCode, out.Signal, out.TimedOut, out.Killed
	rec.Sandbox.Writable = spec.Writable
	rec.Sandbox.Network = RecordNetwork{Mode: "bridge-only", AllowLoopback: spec.AllowLoopback, AllowEgress: spec.AllowEgress}
	if len(spec.AllowEgress) > 0 {
		rec.Sandbox.Network.Mode = "bridge+egress-proxy"
	}
	rec.Cost.EndedAt = time.Now()
	rec.Cost.ElapsedMs = millis(rec.Cost.EndedAt.Sub(rec.Cost.StartedAt))
	rec.Cost.ToolCalls = len(rec.Execution.Operations)
	if o.Usage != nil {
		in, outTok := o.Usage.InputTokens, o.Usage.OutputTokens
		rec.Cost.InputTokens, rec.Cost.OutputTokens = &in, &outTok
	}
	if modelSrv != nil {
		for _, q := range modelSrv.Requests() {
			if q.Step < 0 {
				continue
			}
			rec.Model.Requests = append(rec.Model.Requests, RecordModelRequest{
				API: q.API, OfferedTools: nonNil(q.OfferedTools), Step: q.Step, StepTool: q.StepTool,
				EmittedTool: q.EmittedTool, Offered: q.Offered, Reply: q.Reply,
			})
		}
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func nonNilEvents(e []bridge.Event) []bridge.Event { return nonNil(e) }

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const tailBytes = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if t.buf.Len() > tailBytes {
		b := t.buf.Bytes()[t.buf.Len()-tailBytes:]
		t.buf = *bytes.NewBuffer(append([]byte(nil), b...))
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.buf.String())
}
