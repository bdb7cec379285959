package launcher

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/runconfig"
	"github.com/sharedos/sharedos-run/sandbox"
)

// Environment variables a sandboxed command gets to reach the bridge.
const (
	EnvMCPURL   = "SHAREDOS_MCP_URL"
	EnvMCPToken = "SHAREDOS_MCP_TOKEN"
)

// bridgeListener is the name of the in-sandbox listener the bridge serves on.
const bridgeListener = "bridge"

// BridgedRun is a command run in the sandbox with the turn's bridge as its only way
// to act: the command finds the bridge at $SHAREDOS_MCP_URL with the bearer token in
// $SHAREDOS_MCP_TOKEN, and every call it makes is decided by the kernel.
type BridgedRun struct {
	Config  *runconfig.Config
	Sandbox sandbox.Spec
	// Version is reported as the bridge's serverInfo version.
	Version string
	Logger  *slog.Logger
	// Signals are forwarded to the sandbox (first: to the command; second: kill).
	Signals <-chan os.Signal
	// Started, when set, is called once the sandbox is ready and before the command runs.
	Started func(*sandbox.Sandbox)
}

// BridgedResult is what a bridged run leaves.
type BridgedResult struct {
	Outcome     sandbox.Outcome
	ExecutionID string
	Catalog     bridge.Catalog
	PolicyHash  string
	Events      []bridge.Event
	Initialized bool
	Listed      bool
}

// RunBridged runs the command: context and grants → catalogue → sandbox with a
// listener inside → bridge on it → command → bridge closed. An error means the run
// could not be set up; what happened to the command is in the result's Outcome.
func RunBridged(ctx context.Context, r BridgedRun) (*BridgedResult, error) {
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := r.Config
	policyHash, err := cfg.PolicyHash()
	if err != nil {
		return nil, fmt.Errorf("hashing the tool policy: %w", err)
	}

	// The sandbox does not depend on the catalogue, nor the catalogue on the sandbox:
	// set both up at once (the stub starts while the kernel is built). The command is
	// released only once both are ready. When the catalogue fails the sandbox is
	// aborted and the catalogue's error wins, as if it had been set up first.
	spec := r.Sandbox
	spec.Listeners = append(append([]string(nil), spec.Listeners...), bridgeListener)
	spec.Logger = logger
	type started struct {
		sb  *sandbox.Sandbox
		err error
	}
	sbc := make(chan started, 1)
	go func() {
		sb, err := sandbox.Start(ctx, spec)
		sbc <- started{sb, err}
	}()
	abort := func() {
		if s := <-sbc; s.err == nil {
			s.sb.Kill()
			s.sb.Wait()
		}
	}

	execID := NewExecutionID()
	opened, err := OpenTurn(ctx, cfg, execID)
	if err != nil {
		abort()
		return nil, err
	}
	defer opened.Close()
	turn, cat := opened.Turn, opened.Catalog
	secret := make([]byte, 32)
	rand.Read(secret)
	srv, err := bridge.New(bridge.Options{
		Catalog: cat, Turn: turn, TraceID: execID, Secret: secret, Version: r.Version, Logger: logger,
	})
	if err != nil {
		abort()
		return nil, err
	}
	token, err := srv.Token(time.Now().Add(tokenLifetime(spec)))
	if err != nil {
		srv.Close()
		abort()
		return nil, err
	}

	st := <-sbc
	if st.err != nil {
		srv.Close()
		return nil, &SandboxError{Err: st.err}
	}
	sb := st.sb
	l := sb.Listener(bridgeListener)
	go func() {
		if err := srv.Serve(l); err != nil {
			logger.Error("bridge stopped", "err", err)
		}
	}()
	if r.Started != nil {
		r.Started(sb)
	}
	stopSignals := forwardSignals(r.Signals, sb)
	url := fmt.Sprintf("http://%s%s", l.Addr().(*net.TCPAddr).AddrPort(), bridge.Path)
	if err := sb.Go(EnvMCPURL+"="+url, EnvMCPToken+"="+token); err != nil {
		logger.Error("starting the command", "err", err)
	}
	out := sb.Wait()
	stopSignals()
	srv.Close()
	return &BridgedResult{
		Outcome: out, ExecutionID: execID, Catalog: cat, PolicyHash: policyHash,
		Events: srv.Events(), Initialized: srv.Initialized(), Listed: srv.Listed(),
	}, nil
}

// SandboxError marks a failure to set up the sandbox (the launcher's exit 125).
type SandboxError struct{ Err error }

func (e *SandboxError) Error() string { return e.Err.Error() }
func (e *SandboxError) Unwrap() error { return e.Err }

// tokenLifetime covers the whole run: its timeout and grace when it has one, a day
// otherwise. The token dies with the turn anyway: Close shuts the door.
func tokenLifetime(s sandbox.Spec) time.Duration {
	if s.Timeout > 0 {
		grace := s.Grace
		if grace <= 0 {
			grace = sandbox.DefaultGrace
		}
		return s.Timeout + grace + time.Minute
	}
	return 24 * time.Hour
}

func forwardSignals(sigs <-chan os.Signal, sb *sandbox.Sandbox) (stop func()) {
	done := make(chan struct{})
	if sigs != nil {
		go func() {
			for {
				select {
				case s := <-sigs:
					if sig, ok := s.(syscall.Signal); ok {
						sb.Signal(sig)
					}
				case <-done:
					return
				}
			}
		}()
	}
	return func() { close(done) }
}
