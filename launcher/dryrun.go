package launcher

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/harnessspec"
)

// Plan is what a turn would launch, for --dry-run: nothing starts.
type Plan struct {
	Harness             string     `json:"harness"`
	SpecID              string     `json:"specId"`
	Availability        string     `json:"availability"`
	Placeholders        string     `json:"placeholders"`
	Argv                []string   `json:"argv"`
	EnvNames            []string   `json:"envNames"`
	Stdin               string     `json:"stdin"`
	Files               []PlanFile `json:"files"`
	MCPSupport          string     `json:"mcpSupport"`
	MCPExtension        string     `json:"mcpExtension,omitempty"`
	MCPExtensionVersion string     `json:"mcpExtensionVersion,omitempty"`
	DeclaredLocalTools  []string   `json:"declaredLocalTools"`
	PolicyCanonical     string     `json:"policy"`
	PolicyHash          string     `json:"policyHash"`
	CatalogHash         string     `json:"catalogHash"`
	ToolCount           int        `json:"toolCount"`
	Model               string     `json:"model"`
	Warnings            []string   `json:"warnings,omitempty"`
}

// PlanFile is a file the launch would write (its content stays out of the plan: it
// may name variables, never their values, but it is long).
type PlanFile struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

// Placeholders stand in for what only a real run knows.
const (
	dryScratch    = "/SCRATCH"
	dryBridgeURL  = "http://127.0.0.1:1/mcp"
	dryExecution  = "exec-dry-run"
	placeholderNB = "/SCRATCH is the run's scratch directory, port 1 the bridge's and port 2 the scripted model's (a real run picks them when it starts); exec-dry-run is the execution id"
)

// DryRun resolves the turn as far as it can without starting anything: options,
// catalogue, policy, and the launch with placeholder paths and ports.
func DryRun(ctx context.Context, r TurnRequest) (*Plan, error) {
	options, err := r.Spec.ResolveOptions(r.Options)
	if err != nil {
		return nil, err
	}
	availability := "available"
	inst, err := Probe(ctx, r.Spec, r.Prefixes)
	var na *NotAvailableError
	switch {
	case errors.As(err, &na):
		availability = "not available: " + na.Reason
		inst = Installed{Executable: r.Spec.Probe.Executables[0]}
	case err != nil:
		return nil, err
	default:
		availability = "available, version " + inst.Version
	}
	cfg := r.Config
	opened, err := OpenTurn(ctx, cfg, dryExecution, r.Providers...)
	if err != nil {
		return nil, err
	}
	defer opened.Close()
	cat := opened.Catalog
	model := modelPlaceholder(r.Model)
	in := launchInput(r, options, inst, model, dryExecution, dryBridgeURL, dryScratch+"/home", dryScratch+"/work")
	if inst.Prefix == "" && r.Spec.ID == "pi" {
		in.Prefix = "/PREFIX" // extension mode needs one; shown as a placeholder
	}
	l, err := r.Spec.Launch(in)
	if err != nil {
		return nil, err
	}
	toolPolicy := EffectivePolicy(cfg, l)
	policyHash, err := toolPolicy.Hash()
	if err != nil {
		return nil, err
	}
	policyCanon, err := canonjson.Marshal(toolPolicy)
	if err != nil {
		return nil, err
	}
	env, err := launchEnv(l, r.Sandbox, tokenEnv+"=…", scriptedEnv(r.Model))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	names = append(names, "HOME", "TMPDIR", "PATH", "LANG", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")
	if len(r.Sandbox.AllowEgress) > 0 {
		names = append(names, "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY")
	}
	names = append(names, r.Sandbox.PassEnv...)
	sort.Strings(names)
	names = compact(names)
	p := &Plan{
		Harness: r.Spec.Label, SpecID: r.Spec.ID, Availability: availability, Placeholders: placeholderNB,
		Argv: l.Argv, EnvNames: names, Stdin: l.Stdin.Mode, MCPSupport: l.MCPSupport, MCPExtension: l.MCPExtension,
		MCPExtensionVersion: l.MCPExtensionVersion, DeclaredLocalTools: nonNil(l.DeclaredLocalTools),
		PolicyCanonical: string(policyCanon), PolicyHash: policyHash, CatalogHash: cat.CatalogHash, ToolCount: len(cat.Tools),
		Model: fmt.Sprintf("%s (%s)", model.ID, model.Provider), Warnings: l.Warnings,
	}
	if l.Stdin.Mode == harnessspec.StdinRPC {
		p.Stdin = fmt.Sprintf("rpc (%d line(s), then closed when the harness settles)", len(l.Stdin.Lines))
	}
	for _, f := range l.Files {
		p.Files = append(p.Files, PlanFile{Path: f.Path, Size: len(f.Content)})
	}
	if extra := beyondPolicy(toolPolicy, l.DeclaredLocalTools); len(extra) > 0 {
		p.Warnings = append(p.Warnings, "the strict tool policy does not declare "+strings.Join(extra, ", ")+": a real run would be refused")
	}
	return p, nil
}

func scriptedEnv(m ModelSeat) []string {
	if m.Script != nil {
		return []string{ScriptedModelKeyEnv + "=…"}
	}
	return nil
}

func compact(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
