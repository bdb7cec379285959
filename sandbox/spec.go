package sandbox

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Spec is everything one run needs. Zero values mean "the safe default".
type Spec struct {
	// Command is argv; Command[0] is looked up on the sandbox's PATH. It may be left
	// empty when the caller gives it to GoCommand (a launch that needs the sandbox's
	// paths and ports to build its own argv).
	Command []string
	// Env holds extra KEY=VALUE pairs for the command (after the defaults, before the
	// proxy variables, which cannot be overridden).
	Env []string
	// PassEnv names variables copied from the caller's environment (credentials, say).
	// LD_* and other loader variables are refused.
	PassEnv []string
	// Dir is the command's working directory; empty means the scratch work directory.
	// It stays visible (read-only unless it is also Writable) even when it lies below a
	// hidden path such as /tmp.
	Dir string

	// ScratchParent is where the per-run scratch directory is made (default os.TempDir()).
	ScratchParent string
	// KeepScratch leaves the scratch directory in place after the run.
	KeepScratch bool

	Limits Limits
	// RequireCgroup turns "no cgroup" from a warning into an error.
	RequireCgroup bool

	// Listeners names the TCP listeners to create on 127.0.0.1 inside the network
	// namespace (an ephemeral port each), for the caller to serve on.
	Listeners []string
	// AllowLoopback lists host loopback ports mirrored inside under the same number.
	AllowLoopback []int
	// AllowEgress lists host:port pairs reachable through the HTTP CONNECT proxy.
	AllowEgress []string

	// Writable lists paths that stay writable inside (the root is read-only).
	Writable []string
	// Visible lists directories that stay visible, read-only, at their own place even
	// below a hidden directory (an install prefix under /tmp, say).
	Visible []string

	// TTY runs the command on a pseudo-terminal.
	TTY bool
	// Timeout bounds the whole run (0: none). On expiry the command gets SIGTERM,
	// then Grace, then everything is killed.
	Timeout time.Duration
	// Grace is how long a forwarded signal or the timeout's SIGTERM may take before the
	// sandbox is killed (default 10s).
	Grace time.Duration

	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Logger receives diagnostics and the cgroup warning (default: discard).
	Logger *slog.Logger

	// cgroupMode forces a cgroup mode (tests exercise the v1 path on hybrid hosts).
	cgroupMode CgroupMode
	// probe makes the stub set everything up and exit 0 without running a command.
	probe bool
}

// Limits are the cgroup limits of a run; zero means unlimited (Pids: DefaultPids).
type Limits struct {
	MemoryBytes int64 `json:"memoryBytes"`
	Pids        int64 `json:"pids"`
	// CPUs is a fraction of CPUs (1.5 = one and a half cores).
	CPUs float64 `json:"cpus"`
}

// DefaultPids bounds tasks (threads count) when the run sets no limit: an idle Node.js
// process has 7 threads here, so 1024 leaves room for a CLI with many sub-processes
// while stopping a fork bomb within a second.
const DefaultPids = 1024

// DefaultGrace is the grace period after a forwarded signal or the timeout's SIGTERM.
const DefaultGrace = 10 * time.Second

// Outcome is what a run ends with.
type Outcome struct {
	// ExitCode is the command's status, 128+Signal when it died of a signal, -1 when it
	// never ran (Err says why).
	ExitCode int
	Signal   int
	TimedOut bool
	// Killed is true when the sandbox was killed (second signal, grace expiry, timeout).
	Killed bool
	// StartError says why the command could not be executed (ExitCode 126 or 127).
	StartError string
	// Err is set when the sandbox itself failed after Start.
	Err error

	CgroupMode CgroupMode
	Stats      Stats
	Violations []Violation
	// Scratch is the scratch directory (already removed unless KeepScratch).
	Scratch string
	// Teardown is how long cleanup took after the stub exited.
	Teardown time.Duration
}

// Stats are the cgroup's counters at the end of the run (zero when unknown).
type Stats struct {
	PeakMemory    int64         `json:"peakMemory"`
	OOMKills      int64         `json:"oomKills"`
	PeakTasks     int64         `json:"peakTasks"`
	PidsLimitHits int64         `json:"pidsLimitHits"`
	CPUTime       time.Duration `json:"cpuTime"`
}

// Violation is one thing the sandbox refused or had to do by force.
type Violation struct {
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
}

// Violation kinds.
const (
	ViolationProxyDenied   = "egress-denied"     // the proxy refused a request
	ViolationPortDenied    = "port-denied"       // a connection to a loopback port nobody serves
	ViolationOOMKill       = "oom-kill"          // the memory limit killed a process
	ViolationPidsLimit     = "pids-limit"        // fork/clone failed at the pids limit
	ViolationKilledCleanup = "killed-at-cleanup" // a process still alive when the command ended
	ViolationWritable      = "writable"          // a path made writable on request (recorded)
)

func (s *Spec) validate() error {
	for _, name := range s.PassEnv {
		if err := checkPassEnv(name); err != nil {
			return err
		}
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") || strings.HasPrefix(kv, "=") {
			return fmt.Errorf("environment entry %q is not KEY=VALUE", kv)
		}
	}
	seen := map[string]bool{}
	for _, n := range s.Listeners {
		if n == "" || strings.HasPrefix(n, "_") {
			return fmt.Errorf("listener name %q: must be non-empty and not start with _", n)
		}
		if seen[n] {
			return fmt.Errorf("listener %q asked for twice", n)
		}
		seen[n] = true
	}
	for _, p := range s.AllowLoopback {
		if p < 1 || p > 65535 {
			return fmt.Errorf("--allow-loopback %d: not a port", p)
		}
	}
	for _, e := range s.AllowEgress {
		if _, err := parseAllow(e); err != nil {
			return err
		}
	}
	if s.Limits.MemoryBytes < 0 || s.Limits.Pids < 0 || s.Limits.CPUs < 0 {
		return errors.New("limits must not be negative")
	}
	if s.Timeout < 0 || s.Grace < 0 {
		return errors.New("timeout and grace must not be negative")
	}
	return nil
}
