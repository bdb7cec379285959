package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/launcher"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

// harnessCommands is one command per harness spec: `sharedos-run <id> [flags] -- "task" [harness args…]`.
func harnessCommands() []*cli.Command {
	var cmds []*cli.Command
	for _, spec := range harnessspec.All() {
		flags := append(configFlags(), turnFlags()...)
		for _, o := range spec.Options {
			flags = append(flags, &cli.StringFlag{Name: o.Name, Value: o.Default, Usage: fmt.Sprintf("%s (%s)", o.Help, strings.Join(o.Values, "|"))})
		}
		cmds = append(cmds, &cli.Command{
			Name:      spec.ID,
			Usage:     fmt.Sprintf("run %s for one turn in the sandbox, acting only through the managed catalogue", spec.Label),
			ArgsUsage: "[flags] -- \"task\" [harness args...]",
			Description: "Everything after -- is the task, then arguments passed to the harness untouched.\n" +
				"Without --model the seat is the scripted model (offline; --script FILE, or a built-in demo).\n\n" +
				"Exit status: 0 when the turn succeeded; 1 when it failed, the harness declined the\n" +
				"catalogue or the tool policy refused it (the record says which); 3 when the harness is\n" +
				"not available; 124 timeout; 125 the sandbox could not be set up; 2 usage.",
			Flags:  flags,
			Action: func(c *cli.Context) error { return runHarness(c, spec) },
		})
	}
	return cmds
}

// exitNotAvailable: the harness is not installed or does not answer.
const exitNotAvailable = 3

func turnFlags() []cli.Flag {
	return append(runLimitFlags(),
		&cli.StringFlag{Name: "model", Usage: "model `ID` for a live provider; \"scripted\" (the default) for the scripted model"},
		&cli.StringFlag{Name: "provider", Usage: "provider of a live model (anthropic, openai, …)"},
		&cli.StringFlag{Name: "base-url", Usage: "endpoint `URL` of a live provider (its host:port is the only egress allowed)"},
		&cli.StringFlag{Name: "key-env", Usage: "environment `VAR` holding a live provider's key (passed to the harness)"},
		&cli.StringFlag{Name: "script", Usage: "scripted model `FILE`: {\"steps\":[{\"tool\",\"arguments\"}…],\"final\":\"…\"}"},
		&cli.StringFlag{Name: "record", Usage: "write the execution record (JSON) to `PATH`"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the launch (argv, environment names, files, policy, catalogHash) and start nothing"},
		&cli.BoolFlag{Name: "json", Usage: "print the record (or the dry run) as JSON on stdout"},
	)
}

func runHarness(c *cli.Context, spec harnessspec.Spec) error {
	args := c.Args().Slice()
	if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
		return usagef("%s needs a task: sharedos-run %s [flags] -- \"task\" [harness args...]", spec.ID, spec.ID)
	}
	options := map[string]string{}
	for _, o := range spec.Options {
		options[o.Name] = c.String(o.Name)
	}
	if _, err := spec.ResolveOptions(options); err != nil {
		return usageError{err}
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	seat, egress, err := modelSeat(c, spec)
	if err != nil {
		return err
	}
	sbSpec := sandbox.Spec{
		Timeout: c.Duration("timeout"), Grace: c.Duration("grace"),
		Limits:      sandbox.Limits{Pids: c.Int64("pids"), CPUs: c.Float64("cpus")},
		AllowEgress: append(c.StringSlice("allow-egress"), egress...),
		PassEnv:     c.StringSlice("pass-env"),
	}
	if seat.KeyEnv != "" && !containsString(sbSpec.PassEnv, seat.KeyEnv) {
		sbSpec.PassEnv = append(sbSpec.PassEnv, seat.KeyEnv)
	}
	if m := c.String("memory"); m != "" {
		n, err := parseSize(m)
		if err != nil {
			return usagef("--memory %q: %v", m, err)
		}
		sbSpec.Limits.MemoryBytes = n
	}
	req := launcher.TurnRequest{
		Spec: spec, Options: options, Config: cfg, Prompt: args[0], ExtraArgs: args[1:], Model: seat,
		Sandbox: sbSpec, Prefixes: launcher.HarnessPrefixes(), Version: fullVersion(), Logger: loggerOf(c),
	}
	if c.Bool("dry-run") {
		plan, err := launcher.DryRun(c.Context, req)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(c.App.Writer, plan)
		}
		return printPlan(c.App.Writer, plan)
	}

	ctx := context.WithoutCancel(c.Context)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	req.Signals = sigs
	req.HarnessStderr = io.Discard
	req.Started = func(sb *sandbox.Sandbox) {
		if w := sb.CgroupWarning(); w != "" {
			fmt.Fprintf(c.App.ErrWriter, "sharedos-run: warning: %s\n", w)
		}
	}
	rec, err := launcher.RunTurn(ctx, req)
	var na *launcher.NotAvailableError
	var sbErr *launcher.SandboxError
	switch {
	case errors.As(err, &na):
		fmt.Fprintf(c.App.ErrWriter, "sharedos-run: %s: not available: %s\n", spec.ID, na.Reason)
		return exitStatus(exitNotAvailable)
	case errors.As(err, &sbErr):
		fmt.Fprintf(c.App.ErrWriter, "sharedos-run: %v\n", err)
		return exitStatus(exitSandbox)
	case err != nil:
		return err
	}
	if p := c.String("record"); p != "" {
		if err := writeJSONFile(p, rec); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "sharedos-run: writing the record: %v\n", err)
		}
	}
	if c.Bool("json") {
		if err := writeJSON(c.App.Writer, rec); err != nil {
			return err
		}
	} else {
		printSummary(c.App.Writer, rec)
	}
	switch rec.Execution.Status {
	case launcher.StatusSucceeded:
		return nil
	case launcher.StatusTimeout:
		return exitStatus(exitTimeout)
	case launcher.StatusSandboxFailed:
		return exitStatus(exitSandbox)
	}
	return exitStatus(exitFailure)
}

// modelSeat reads the model flags: the scripted model by default, a live provider
// with --model ID (its endpoint then being the only egress allowed).
func modelSeat(c *cli.Context, spec harnessspec.Spec) (launcher.ModelSeat, []string, error) {
	id := c.String("model")
	if id == "" || id == "scripted" {
		script := scriptedmodel.DemoScript()
		if p := c.String("script"); p != "" {
			data, err := os.ReadFile(p)
			if err != nil {
				return launcher.ModelSeat{}, nil, fmt.Errorf("reading --script: %w", err)
			}
			script, err = scriptedmodel.ParseScript(data)
			if err != nil {
				return launcher.ModelSeat{}, nil, fmt.Errorf("--script %s: %w", p, err)
			}
		}
		return launcher.ModelSeat{Script: &script, ID: scriptedModelID(spec)}, nil, nil
	}
	if c.String("script") != "" {
		return launcher.ModelSeat{}, nil, usagef("--script is for the scripted model; drop it or --model")
	}
	seat := launcher.ModelSeat{ID: id, Provider: c.String("provider"), BaseURL: c.String("base-url"), KeyEnv: c.String("key-env")}
	host := defaultProviderHost(seat.Provider)
	if seat.BaseURL != "" {
		u, err := url.Parse(seat.BaseURL)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return launcher.ModelSeat{}, nil, usagef("--base-url %q: want http(s)://host[:port]", seat.BaseURL)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		host = u.Hostname() + ":" + port
	}
	if host == "" {
		return launcher.ModelSeat{}, nil, usagef("a live model needs --provider (anthropic, openai) or --base-url, so that its endpoint is the only egress allowed")
	}
	if seat.KeyEnv == "" {
		return launcher.ModelSeat{}, nil, usagef("a live model needs --key-env VAR naming the variable that holds its key")
	}
	return seat, []string{host}, nil
}

// scriptedModelID is the model name the scripted seat answers to: one the CLI takes
// for a model of its own API family without switching modes (Codex treats GPT slugs
// as "code mode").
func scriptedModelID(spec harnessspec.Spec) string {
	if spec.ModelAPI == harnessspec.APIAnthropicMessages {
		return "claude-sonnet-4-5"
	}
	return "scripted-model"
}

func defaultProviderHost(provider string) string {
	switch provider {
	case "anthropic":
		return "api.anthropic.com:443"
	case "openai":
		return "api.openai.com:443"
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printSummary(w io.Writer, r *launcher.Record) {
	fmt.Fprintf(w, "%s %s · %s · execution %s\n", r.Identity.Harness, r.Identity.HarnessVersion, r.Execution.Status, r.Execution.ExecutionID)
	if r.Execution.Reason != "" {
		fmt.Fprintf(w, "  reason:      %s\n", r.Execution.Reason)
	}
	fmt.Fprintf(w, "  model:       %s (%s)\n", r.Identity.ModelID, r.Identity.Provider)
	fmt.Fprintf(w, "  catalogue:   %d tools, catalogHash %s\n", r.Identity.ToolCount, r.Identity.CatalogHash)
	fmt.Fprintf(w, "  policy:      %s, policyHash %s\n", r.Identity.ToolPolicy.Mode, r.Identity.PolicyHash)
	fmt.Fprintf(w, "  bridge:      initialized %v, listed %v\n", r.Execution.Bridge.Initialized, r.Execution.Bridge.Listed)
	for _, op := range r.Execution.Operations {
		code := op.Code
		if code == "" {
			code = "-"
		}
		fmt.Fprintf(w, "  call         %-24s %-10s %-26s /%s\n", op.Tool, op.Outcome, code, strings.Join(op.Resource, "/"))
	}
	fmt.Fprintf(w, "  sandbox:     cgroup %s, exit %d, peak memory %d B, peak tasks %d, violations %d\n",
		r.Sandbox.CgroupMode, r.Sandbox.ExitCode, r.Sandbox.PeakMemory, r.Sandbox.PeakTasks, len(r.Sandbox.Violations))
	fmt.Fprintf(w, "  elapsed:     %.0f ms\n", r.Cost.ElapsedMs)
	if r.Execution.OutputText != "" {
		text := r.Execution.OutputText
		if len(text) > 400 {
			text = text[:400] + "…"
		}
		fmt.Fprintf(w, "  output:      %s\n", strings.ReplaceAll(text, "\n", "\n               "))
	}
}

func printPlan(w io.Writer, p *launcher.Plan) error {
	fmt.Fprintf(w, "dry run: %s (%s) — nothing started\n", p.Harness, p.Availability)
	fmt.Fprintf(w, "placeholders: %s\n\n", p.Placeholders)
	fmt.Fprintf(w, "argv:\n")
	for _, a := range p.Argv {
		fmt.Fprintf(w, "  %q\n", a)
	}
	fmt.Fprintf(w, "environment (names only):\n  %s\n", strings.Join(p.EnvNames, " "))
	fmt.Fprintf(w, "stdin: %s\n", p.Stdin)
	fmt.Fprintf(w, "files:\n")
	for _, f := range p.Files {
		fmt.Fprintf(w, "  %s (%d bytes)\n", f.Path, f.Size)
	}
	fmt.Fprintf(w, "mcp: %s", p.MCPSupport)
	if p.MCPExtension != "" {
		fmt.Fprintf(w, " (%s %s)", p.MCPExtension, p.MCPExtensionVersion)
	}
	fmt.Fprintf(w, "\nlocal tools declared: %v\n", p.DeclaredLocalTools)
	fmt.Fprintf(w, "policy: %s, policyHash %s\n", p.PolicyCanonical, p.PolicyHash)
	fmt.Fprintf(w, "catalogue: %d tools, catalogHash %s\n", p.ToolCount, p.CatalogHash)
	fmt.Fprintf(w, "model: %s\n", p.Model)
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}
