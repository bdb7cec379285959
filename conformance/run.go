package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/launcher"
	"github.com/sharedos/sharedos-run/policy"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

// Column is one harness configuration in the table.
type Column struct {
	ID      string
	Label   string
	Harness string
	Options map[string]string
}

// DefaultColumns are every harness sharedos-run knows, Pi in both MCP modes.
func DefaultColumns() []Column {
	return []Column{
		{ID: "claude-code", Label: "Claude Code", Harness: "claude-code"},
		{ID: "codex", Label: "Codex", Harness: "codex"},
		{ID: "pi/extension", Label: "Pi (pi-mcp-adapter)", Harness: "pi", Options: map[string]string{"pi-mcp": "extension"}},
		{ID: "pi/native", Label: "Pi (built-in MCP)", Harness: "pi", Options: map[string]string{"pi-mcp": "native"}},
		{ID: "deepseek", Label: "DeepSeek Harness", Harness: "deepseek"},
	}
}

// SelectColumns keeps the columns whose id or harness is named (all when none is).
func SelectColumns(all []Column, names []string) ([]Column, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []Column
	for _, n := range names {
		found := false
		for _, c := range all {
			if (c.ID == n || c.Harness == n) && !slices.ContainsFunc(out, func(o Column) bool { return o.ID == c.ID }) {
				out = append(out, c)
				found = true
			}
		}
		if !found {
			var known []string
			for _, c := range all {
				known = append(known, c.ID)
			}
			return nil, fmt.Errorf("unknown harness %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// Config is the run's configuration file (`--config`, default $SHAREDOS_MCP_CONFIG).
type Config struct {
	Model     *ConfigModel             `json:"model,omitempty"`
	Harnesses map[string]ConfigHarness `json:"harnesses,omitempty"`
}

// ConfigModel is a live model for every column (or one column).
type ConfigModel struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	BaseURL  string `json:"baseUrl,omitempty"`
	KeyEnv   string `json:"keyEnv,omitempty"`
}

// ConfigHarness is one harness's (or column's) settings; env values and args are
// expanded from the environment (${VAR}) and go to the harness untouched.
type ConfigHarness struct {
	Env                 map[string]string `json:"env,omitempty"`
	Args                []string          `json:"args,omitempty"`
	CredentialVariables []string          `json:"credentialVariables,omitempty"`
	Model               *ConfigModel      `json:"model,omitempty"`
	// HostDeny refuses tools for this column whatever the case grants (its
	// catalogue then differs from the other columns', and the run says so).
	HostDeny []string `json:"hostDeny,omitempty"`
}

// ParseConfig reads a configuration strictly, expanding ${VAR} in env and args.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := strictJSON(data, &c); err != nil {
		return Config{}, fmt.Errorf("conformance configuration: %w", err)
	}
	for id, h := range c.Harnesses {
		for k, v := range h.Env {
			h.Env[k] = os.Expand(v, os.Getenv)
		}
		for i, a := range h.Args {
			h.Args[i] = os.Expand(a, os.Getenv)
		}
		c.Harnesses[id] = h
	}
	return c, nil
}

func (c Config) forColumn(col Column) ConfigHarness {
	if h, ok := c.Harnesses[col.ID]; ok {
		return h
	}
	return c.Harnesses[col.Harness]
}

// Options are one conformance run.
type Options struct {
	CaseSet  CaseSet
	Cases    []Case
	Columns  []Column
	Config   Config
	Prefixes []string
	Version  string
	Jobs     int
	Shard    *ShardInfo
	// CellTimeout bounds one turn (default 3 minutes).
	CellTimeout time.Duration
	// Progress receives a line per cell (nil: none).
	Progress io.Writer
	Logger   *slog.Logger
}

type cellJob struct {
	index  int
	c      Case
	col    Column
	result Cell
	rec    *launcher.Record
}

// Run probes every column and runs the cells of this shard, Jobs at a time, each in
// its own sandbox.
func Run(ctx context.Context, o Options) (*Artifact, error) {
	start := time.Now()
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if o.CellTimeout <= 0 {
		o.CellTimeout = 3 * time.Minute
	}
	cfgHash, err := canonjson.HashValue(o.Config)
	if err != nil {
		return nil, err
	}
	a := &Artifact{Kind: ArtifactKind, SharedosRun: VersionInfo{Version: o.Version}, CaseSetHash: o.CaseSet.Hash, ConfigHash: cfgHash,
		CasesDeclared: o.CaseSet.IDs(), CasesRun: []string{}, Shard: o.Shard, Warnings: []string{}}
	for _, c := range o.Cases {
		a.CasesRun = append(a.CasesRun, c.ID)
	}
	a.Model = seatInfo(o.Config.Model)
	available := map[string]bool{}
	for _, col := range o.Columns {
		av := probeColumn(ctx, col, o)
		available[col.ID] = av.Available
		a.Availability = append(a.Availability, av)
		a.Catalogues = append(a.Catalogues, ColumnCatalog{ColumnID: col.ID, CatalogHashByCase: map[string]string{}})
		a.Sandbox = append(a.Sandbox, ColumnSandbox{ColumnID: col.ID, Mode: "namespaces(net,pid,mount" + map[bool]string{true: ")", false: ",user)"}[os.Geteuid() == 0],
			Cgroup: string(sandbox.HostCgroupMode()), Network: "bridge-only (model mirrored on loopback)"})
	}

	var jobs []*cellJob
	i := 0
	for _, c := range o.Cases {
		for _, col := range o.Columns {
			if o.Shard == nil || i%o.Shard.Count == o.Shard.Index-1 {
				jobs = append(jobs, &cellJob{index: i, c: c, col: col})
			}
			i++
		}
	}
	total := len(jobs)
	var mu sync.Mutex
	done := 0
	work := make(chan *cellJob)
	var wg sync.WaitGroup
	for range o.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				cellStart := time.Now()
				if !available[j.col.ID] {
					av := a.Availability[slices.IndexFunc(a.Availability, func(x Availability) bool { return x.ColumnID == j.col.ID })]
					j.result = Cell{ColumnID: j.col.ID, Status: StatusNotExercised, ReasonCodes: []string{}, Detail: "not available: " + av.Reason}
				} else {
					j.result, j.rec = runCell(ctx, j.c, j.col, o)
				}
				mu.Lock()
				done++
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "[%d/%d] %-14s %-22s %-14s %5.1fs\n", done, total, j.col.ID, j.c.ID, j.result.Status, time.Since(cellStart).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()

	rows := map[string]*Row{}
	for _, c := range o.Cases {
		rows[c.ID] = &Row{CaseID: c.ID, Invariant: c.Invariant}
	}
	for _, j := range jobs {
		rows[j.c.ID].Cells = append(rows[j.c.ID].Cells, j.result)
		if j.rec == nil {
			continue
		}
		cat := catalogOf(a, j.col.ID)
		cat.CatalogHashByCase[j.c.ID] = "sha256:" + j.rec.Identity.CatalogHash
		for _, op := range j.rec.Execution.Operations {
			cat.Calls = append(cat.Calls, Call{CaseID: j.c.ID, Tool: op.Tool, Path: op.Resource, Outcome: op.Outcome, ReasonCode: op.Code})
		}
		if av := &a.Availability[slices.IndexFunc(a.Availability, func(x Availability) bool { return x.ColumnID == j.col.ID })]; av.PolicyHash == "" {
			av.PolicyHash, av.ToolPolicy = j.rec.Identity.PolicyHash, j.rec.Identity.ToolPolicy
		}
	}
	columns := columnOrder(a)
	for _, c := range o.Cases {
		row := rows[c.ID]
		if len(row.Cells) == 0 {
			continue
		}
		sortCells(row.Cells, columns)
		a.Rows = append(a.Rows, *row)
	}
	for i := range a.Catalogues {
		finishCatalog(&a.Catalogues[i], a.CasesRun)
	}
	a.Warnings = append(a.Warnings, Warnings(a)...)
	a.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	return a, nil
}

func seatInfo(m *ConfigModel) *ModelInfo {
	if m == nil {
		return &ModelInfo{ID: "scripted", Provider: "scripted"}
	}
	return &ModelInfo{ID: m.ID, Provider: m.Provider}
}

// probeColumn says whether the column's harness can run, and with what launch.
func probeColumn(ctx context.Context, col Column, o Options) Availability {
	av := Availability{ColumnID: col.ID, Label: col.Label, Harness: col.Harness, ToolPolicy: policy.DefaultToolPolicy()}
	spec, ok := harnessspec.ByID(col.Harness)
	if !ok {
		av.Reason = "no such harness"
		return av
	}
	h := o.Config.forColumn(col)
	av.Model = seatInfo(o.Config.Model)
	if h.Model != nil {
		av.Model = seatInfo(h.Model)
	}
	inst, err := launcher.Probe(ctx, spec, o.Prefixes)
	if err != nil {
		var na *launcher.NotAvailableError
		if errors.As(err, &na) {
			av.Reason = na.Reason
		} else {
			av.Reason = err.Error()
		}
		return av
	}
	for _, v := range h.CredentialVariables {
		if os.Getenv(v) == "" {
			av.Reason = fmt.Sprintf("credential variable %s is not set (the configuration requires it)", v)
			return av
		}
	}
	av.Available, av.Version = true, inst.Version
	l, err := spec.Launch(harnessspec.LaunchInput{Prompt: "probe", ExecutionID: "probe", BridgeURL: "http://127.0.0.1:1/mcp", TokenEnv: "SHAREDOS_MCP_TOKEN",
		Home: "/nonexistent/home", WorkDir: "/nonexistent/work", Executable: inst.Executable, Prefix: inst.Prefix, Options: col.Options,
		Model: harnessspec.Model{ID: "probe", BaseURL: "http://127.0.0.1:2", APIKeyEnv: launcher.ScriptedModelKeyEnv}})
	if err == nil {
		av.MCPSupport, av.MCPExtension = l.MCPSupport, l.MCPExtension
	}
	return av
}

// shellToolOf is the harness's own name for its shell.
func shellToolOf(harness string) string {
	switch harness {
	case "claude-code":
		return "Bash"
	case "pi":
		return "bash"
	}
	return "shell"
}

// runCell runs one case through one column and judges it.
func runCell(ctx context.Context, c Case, col Column, o Options) (Cell, *launcher.Record) {
	fail := func(err error) (Cell, *launcher.Record) {
		return Cell{ColumnID: col.ID, Status: StatusNotExercised, ReasonCodes: []string{}, Detail: err.Error()}, nil
	}
	spec, _ := harnessspec.ByID(col.Harness)
	ws, err := os.MkdirTemp("/var/tmp", "sharedos-conformance-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(ws)
	state, err := os.MkdirTemp("/var/tmp", "sharedos-conformance-state-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(state)
	for p, content := range c.World.Files {
		full := filepath.Join(ws, filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return fail(err)
		}
	}
	var grants []policy.Grant
	for _, g := range c.World.Grants {
		grants = append(grants, g.Grant())
	}
	cfg := &runconfig.Config{
		Source: "conformance case " + c.ID, Workspace: ws, StateDir: state,
		Context:           policy.AccessContext{NamespaceID: ContextNamespace, Actor: policy.Actor{Kind: policy.ActorAgent, ID: "harness"}, Authority: ContextAuthority, Purpose: ContextPurpose},
		Grants:            grants,
		EnabledNamespaces: policy.NamespacePatch{Enable: c.World.Namespaces}.Apply(nil),
		Budgets:           c.World.Budgets,
		ToolPolicy:        policy.DefaultToolPolicy(),
		HostDeny:          o.Config.forColumn(col).HostDeny,
	}
	marker := filepath.Join("/var/tmp", "sharedos-conformance-marker-"+randomHex())
	defer os.Remove(marker)
	shell := shellToolOf(col.Harness)
	script := scriptedmodel.Script{Final: "conformance case " + c.ID + " done"}
	for _, a := range c.Attempts {
		if a.Late {
			continue
		}
		args := a.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		step := scriptedmodel.Step{Tool: a.Tool, Arguments: args}
		if a.Local {
			step = scriptedmodel.Step{Tool: shell, Local: true, Arguments: json.RawMessage(strings.ReplaceAll(string(args), "$MARKER", marker))}
		}
		script.Steps = append(script.Steps, step)
	}
	h := o.Config.forColumn(col)
	seat := launcher.ModelSeat{Script: &script, ID: scriptedID(spec)}
	model := o.Config.Model
	if h.Model != nil {
		model = h.Model
	}
	var egress []string
	if model != nil && model.Provider != "scripted" && model.ID != "scripted" {
		seat = launcher.ModelSeat{ID: model.ID, Provider: model.Provider, BaseURL: model.BaseURL, KeyEnv: model.KeyEnv}
		if host := providerHost(model); host != "" {
			egress = append(egress, host)
		}
	} else if model != nil {
		seat.ID = scriptedIDOr(spec, model.ID)
	}
	var env []string
	for k, v := range h.Env {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	var providers []kernel.Provider
	if c.World.Broker {
		providers = append(providers, ticketsProvider{})
	}
	passEnv := append([]string(nil), h.CredentialVariables...)
	if seat.KeyEnv != "" && !slices.Contains(passEnv, seat.KeyEnv) {
		passEnv = append(passEnv, seat.KeyEnv)
	}
	cellCtx, cancel := context.WithTimeout(ctx, o.CellTimeout+30*time.Second)
	defer cancel()
	rec, err := launcher.RunTurn(cellCtx, launcher.TurnRequest{
		Spec: spec, Options: col.Options, Config: cfg, Prompt: prompt(c), ExtraArgs: h.Args, Model: seat,
		Sandbox:   sandbox.Spec{Timeout: o.CellTimeout, Grace: 5 * time.Second, Env: env, PassEnv: passEnv, AllowEgress: egress},
		Providers: providers, Prefixes: o.Prefixes, Version: o.Version, Logger: o.Logger,
	})
	if err != nil {
		return fail(err)
	}
	_, statErr := os.Stat(marker)
	cell := Judge(c, col.ID, rec, Evidence{ShellTool: shell, MarkerCreated: statErr == nil})
	return cell, rec
}

// prompt is what a live model would get: the attempts as numbered lines; the
// scripted model plays them whatever the prompt says.
func prompt(c Case) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Conformance case %s. Make each tool call below exactly, in order; a refusal is an expected result, not an error to work around.\n", c.ID)
	n := 0
	for _, a := range c.Attempts {
		if a.Late {
			continue
		}
		n++
		fmt.Fprintf(&b, "%d. %s %s\n", n, a.Tool, string(a.Arguments))
	}
	return b.String()
}

func scriptedID(spec harnessspec.Spec) string {
	if spec.ModelAPI == harnessspec.APIAnthropicMessages {
		return "claude-sonnet-4-5"
	}
	return "scripted-model"
}

// scriptedIDOr uses a configured scripted model name where the CLI can take it.
func scriptedIDOr(spec harnessspec.Spec, id string) string {
	if id == "" || id == "scripted" {
		return scriptedID(spec)
	}
	return id
}

func providerHost(m *ConfigModel) string {
	if m.BaseURL != "" {
		rest := strings.TrimPrefix(strings.TrimPrefix(m.BaseURL, "https://"), "http://")
		host, _, _ := strings.Cut(rest, "/")
		if !strings.Contains(host, ":") {
			if strings.HasPrefix(m.BaseURL, "https://") {
				host += ":443"
			} else {
				host += ":80"
			}
		}
		return host
	}
	switch m.Provider {
	case "anthropic":
		return "api.anthropic.com:443"
	case "openai":
		return "api.openai.com:443"
	}
	return ""
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
