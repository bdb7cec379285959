package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/launcher"
	"github.com/sharedos/sharedos-run/sandbox"
)

// Exit codes of `exec` besides the command's own status (0–255, 128+N when it died of
// signal N, 126 not executable, 127 not found) and exitUsage.
const (
	// exitTimeout: --timeout expired (as timeout(1) does).
	exitTimeout = 124
	// exitSandbox: the sandbox could not be set up (or failed), so nothing ran confined.
	exitSandbox = 125
)

// runLimitFlags are the limits, time bounds and pass-throughs every sandboxed run
// takes (exec and the harness commands).
func runLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "memory", Usage: "memory limit (bytes, or with K/M/G suffix)"},
		&cli.Int64Flag{Name: "pids", Usage: fmt.Sprintf("task limit, threads included (default %d)", sandbox.DefaultPids)},
		&cli.Float64Flag{Name: "cpus", Usage: "CPU limit in cores (1.5 = one and a half)"},
		&cli.StringSliceFlag{Name: "allow-egress", Usage: "allow `HOST:PORT` through the HTTP CONNECT proxy (repeatable)"},
		&cli.StringSliceFlag{Name: "pass-env", Usage: "copy `VAR` from this environment (repeatable; never LD_*)"},
		&cli.DurationFlag{Name: "timeout", Usage: "end the run after this long (SIGTERM, then --grace, then kill)"},
		&cli.DurationFlag{Name: "grace", Value: sandbox.DefaultGrace, Usage: "time between a forwarded signal and the kill"},
	}
}

func sandboxFlags() []cli.Flag {
	return append(runLimitFlags(),
		&cli.BoolFlag{Name: "require-cgroup", Usage: "fail instead of warning when no cgroup can be had"},
		&cli.StringSliceFlag{Name: "allow-loopback", Usage: "mirror host 127.0.0.1:`PORT` inside the sandbox (repeatable)"},
		&cli.StringSliceFlag{Name: "writable", Usage: "keep `PATH` writable inside (the root is read-only; repeatable, recorded)"},
		&cli.StringSliceFlag{Name: "env", Usage: "set `KEY=VALUE` (repeatable)"},
		&cli.StringFlag{Name: "dir", Usage: "working directory (default: the scratch work directory)"},
		&cli.BoolFlag{Name: "tty", Usage: "run the command on a pseudo-terminal"},
		&cli.StringFlag{Name: "scratch-dir", Usage: "where to make the per-run scratch directory (default $TMPDIR)"},
		&cli.BoolFlag{Name: "keep-scratch", Usage: "keep the scratch directory after the run"},
		&cli.StringFlag{Name: "outcome", Usage: "write the run's outcome (status, stats, violations) as JSON to `FILE`"},
	)
}

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run any command in the sandbox",
		ArgsUsage: "[sandbox flags] -- CMD [ARGS...]",
		Description: "Runs CMD in new network, PID and mount namespaces and a cgroup. Its network is\n" +
			"only what the flags allow, the root file system is read-only, HOME and TMPDIR are a\n" +
			"private scratch directory, and nothing it starts outlives it.\n\n" +
			"The command reaches the managed catalogue at $SHAREDOS_MCP_URL (MCP over HTTP) with\n" +
			"the bearer token in $SHAREDOS_MCP_TOKEN; every call is authorized by the kernel\n" +
			"(--config, --workspace, --read-only as for catalog).\n\n" +
			"Exit status: the command's own; 128+N when it died of signal N; 124 timeout;\n" +
			"125 the sandbox could not be set up; 126/127 the command is not executable/not found;\n" +
			"2 usage.",
		Flags:  append(sandboxFlags(), configFlags()...),
		Action: runExec,
	}
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "say what confinement this host can give a run, and what it cannot",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.BoolFlag{Name: "require-cgroup", Usage: "fail when runs cannot get a cgroup"},
		},
		Action: runDoctor,
	}
}

func specFromFlags(c *cli.Context) (sandbox.Spec, error) {
	s := sandbox.Spec{
		Command:       c.Args().Slice(),
		Env:           c.StringSlice("env"),
		PassEnv:       c.StringSlice("pass-env"),
		Dir:           c.String("dir"),
		ScratchParent: c.String("scratch-dir"),
		KeepScratch:   c.Bool("keep-scratch"),
		RequireCgroup: c.Bool("require-cgroup"),
		AllowEgress:   c.StringSlice("allow-egress"),
		Writable:      c.StringSlice("writable"),
		TTY:           c.Bool("tty"),
		Timeout:       c.Duration("timeout"),
		Grace:         c.Duration("grace"),
		Limits:        sandbox.Limits{Pids: c.Int64("pids"), CPUs: c.Float64("cpus")},
	}
	if len(s.Command) == 0 {
		return s, usagef("exec needs a command: sharedos-run exec [flags] -- CMD [ARGS...]")
	}
	if m := c.String("memory"); m != "" {
		n, err := parseSize(m)
		if err != nil {
			return s, usagef("--memory %q: %v", m, err)
		}
		s.Limits.MemoryBytes = n
	}
	for _, p := range c.StringSlice("allow-loopback") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return s, usagef("--allow-loopback %q: not a port", p)
		}
		s.AllowLoopback = append(s.AllowLoopback, n)
	}
	return s, nil
}

// parseSize reads 1073741824, 512K, 512M, 2G (powers of 1024; an optional "i"/"iB"/"B").
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("not a size")
	}
	return int64(n * float64(mult)), nil
}

func runExec(c *cli.Context) error {
	spec, err := specFromFlags(c)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	spec.Stdin, spec.Stdout, spec.Stderr = stdFiles(c)

	// The sandbox decides what a signal means (forward, then kill): the command line's
	// context is cancelled by the first SIGINT, so it must not abort the run.
	ctx := context.WithoutCancel(c.Context)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)

	// The launcher adopts orphans of its own children (spec: child subreaper), so that
	// nothing it started can be re-parented away from it.
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	var restoreTTY func()
	res, err := launcher.RunBridged(ctx, launcher.BridgedRun{
		Config: cfg, Sandbox: spec, Version: fullVersion(), Logger: loggerOf(c), Signals: sigs,
		Started: func(sb *sandbox.Sandbox) {
			if w := sb.CgroupWarning(); w != "" {
				fmt.Fprintf(c.App.ErrWriter, "sharedos-run: warning: %s\n", w)
			}
			if spec.TTY {
				restoreTTY = makeRaw(spec.Stdin)
			}
		},
	})
	if restoreTTY != nil {
		restoreTTY()
	}
	var sbErr *launcher.SandboxError
	if errors.As(err, &sbErr) {
		fmt.Fprintf(c.App.ErrWriter, "sharedos-run: %v\n", err)
		return exitStatus(exitSandbox)
	}
	if err != nil {
		return err
	}
	if p := c.String("outcome"); p != "" {
		if err := writeOutcome(p, res); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "sharedos-run: write outcome: %v\n", err)
		}
	}
	return exitStatus(outcomeStatus(c.App.ErrWriter, res.Outcome))
}

// outcomeStatus maps an outcome to the launcher's exit status, saying why on w.
func outcomeStatus(w io.Writer, out sandbox.Outcome) int {
	if out.StartError != "" {
		fmt.Fprintf(w, "sharedos-run: %s\n", out.StartError)
	}
	for _, v := range out.Violations {
		if v.Kind == sandbox.ViolationOOMKill || v.Kind == sandbox.ViolationPidsLimit {
			fmt.Fprintf(w, "sharedos-run: %s: %s\n", v.Kind, v.Detail)
		}
	}
	switch {
	case out.TimedOut:
		fmt.Fprintln(w, "sharedos-run: timeout")
		return exitTimeout
	case out.Err != nil:
		fmt.Fprintf(w, "sharedos-run: %v\n", out.Err)
		if out.ExitCode >= 0 {
			return out.ExitCode
		}
		return exitSandbox
	}
	return out.ExitCode
}

type outcomeJSON struct {
	ExitCode   int                 `json:"exitCode"`
	Signal     int                 `json:"signal,omitempty"`
	TimedOut   bool                `json:"timedOut,omitempty"`
	Killed     bool                `json:"killed,omitempty"`
	StartError string              `json:"startError,omitempty"`
	Error      string              `json:"error,omitempty"`
	CgroupMode sandbox.CgroupMode  `json:"cgroupMode"`
	Stats      sandbox.Stats       `json:"stats"`
	Violations []sandbox.Violation `json:"violations"`
	Scratch    string              `json:"scratch"`
	TeardownMs float64             `json:"teardownMs"`
	Bridge     bridgeJSON          `json:"bridge"`
}

// bridgeJSON is what the bridge saw during an exec run.
type bridgeJSON struct {
	ExecutionID string         `json:"executionId"`
	CatalogHash string         `json:"catalogHash"`
	PolicyHash  string         `json:"policyHash"`
	Tools       int            `json:"tools"`
	Initialized bool           `json:"initialized"`
	Listed      bool           `json:"listed"`
	Events      []bridge.Event `json:"events"`
}

func writeOutcome(path string, res *launcher.BridgedResult) error {
	out := res.Outcome
	if out.Violations == nil {
		out.Violations = []sandbox.Violation{}
	}
	j := outcomeJSON{ExitCode: out.ExitCode, Signal: out.Signal, TimedOut: out.TimedOut, Killed: out.Killed,
		StartError: out.StartError, CgroupMode: out.CgroupMode, Stats: out.Stats, Violations: out.Violations,
		Scratch: out.Scratch, TeardownMs: float64(out.Teardown.Microseconds()) / 1000,
		Bridge: bridgeJSON{ExecutionID: res.ExecutionID, CatalogHash: res.Catalog.CatalogHash, PolicyHash: res.PolicyHash,
			Tools: len(res.Catalog.Tools), Initialized: res.Initialized, Listed: res.Listed, Events: res.Events}}
	if j.Bridge.Events == nil {
		j.Bridge.Events = []bridge.Event{}
	}
	if out.Err != nil {
		j.Error = out.Err.Error()
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// stdFiles hands the sandbox the process's own descriptors when the app uses them, so
// that the command inherits them directly (no copying goroutines).
func stdFiles(c *cli.Context) (io.Reader, io.Writer, io.Writer) {
	return c.App.Reader, c.App.Writer, c.App.ErrWriter
}

// makeRaw puts the caller's terminal in raw mode for --tty; it returns the restore.
func makeRaw(in io.Reader) func() {
	f, ok := in.(*os.File)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}

func loggerOf(c *cli.Context) *slog.Logger {
	if l, ok := c.App.Metadata["logger"].(*slog.Logger); ok {
		return l
	}
	return nil
}

func runDoctor(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	r := sandbox.Doctor(c.Context, c.Bool("require-cgroup"))
	w := c.App.Writer
	if c.Bool("json") {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(w, string(b))
	} else {
		printReport(w, r)
	}
	if !r.OK {
		return exitStatus(exitFailure)
	}
	return nil
}

func printReport(w io.Writer, r sandbox.Report) {
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "user\tuid %d (%s)\n", r.UID, map[bool]string{true: "rootless: user namespace with identity map", false: "root"}[r.Rootless])
	fmt.Fprintf(tw, "cgroups\t%s, usable: %s\n", r.CgroupMode, yes(r.Cgroup.OK))
	for _, k := range []string{"unified", "memory", "pids", "cpu", "cpuacct", "freezer"} {
		if v, ok := r.Writable[k]; ok {
			fmt.Fprintf(tw, "  %s\twritable: %s\n", k, yes(v))
		}
	}
	for _, k := range []string{"user", "net", "pid", "mount"} {
		ch := r.Namespaces[k]
		fmt.Fprintf(tw, "%s namespace\t%s %s\n", k, yes(ch.OK), ch.Error)
	}
	fmt.Fprintf(tw, "sandbox probe\t%s %s\n", yes(r.Sandbox.OK), r.Sandbox.Error)
	fmt.Fprintf(tw, "pty\t%s %s\n", yes(r.PTY.OK), r.PTY.Error)
	tw.Flush()
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n  fix: %s\n", p.What, p.Fix)
	}
	if r.OK {
		fmt.Fprintln(w, "ok: runs can be confined as asked")
	} else {
		fmt.Fprintln(w, "not ok: a run would not get the confinement it needs (see the problems)")
	}
}
