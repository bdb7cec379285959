package sandbox

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Listener returns the listener created inside the sandbox under name (nil if none).
// The caller serves on it; the sandbox closes it at the end of the run.
func (sb *Sandbox) Listener(name string) net.Listener { return sb.listeners[name] }

// ProxyURL is the egress proxy's address as the command sees it ("" without egress).
func (sb *Sandbox) ProxyURL() string { return sb.proxyURL }

// Env is the environment the command gets when Go is called with no extra variables.
func (sb *Sandbox) Env() []string { return buildEnv(&sb.spec, sb.sc, sb.proxyURL, nil) }

// Scratch is the run's scratch directory (HOME, TMPDIR and work live below it).
func (sb *Sandbox) Scratch() string { return sb.sc.root }

// CgroupMode says how the run is confined ("none" with CgroupWarning set).
func (sb *Sandbox) CgroupMode() CgroupMode { return sb.cgMode }

// CgroupWarning explains why the run has no cgroup ("" when it has one).
func (sb *Sandbox) CgroupWarning() string { return sb.cgWarn }

// cgroupPaths lists the run's cgroup directories (for tests).
func (sb *Sandbox) cgroupPaths() []string {
	if sb.cg == nil {
		return nil
	}
	return sb.cg.paths()
}

// Home is the command's private HOME (in the scratch directory).
func (sb *Sandbox) Home() string { return sb.sc.home }

// WorkDir is the command's working directory: the spec's Dir, else the scratch work
// directory.
func (sb *Sandbox) WorkDir() string {
	if sb.spec.Dir != "" {
		return sb.spec.Dir
	}
	return sb.sc.work
}

// GoCommand releases a command built after Start (from the sandbox's paths and
// listeners), with extra KEY=VALUE variables. Extra variables come last and win.
func (sb *Sandbox) GoCommand(command []string, extraEnv ...string) error {
	if len(command) == 0 {
		return errors.New("sandbox: no command to run")
	}
	sb.mu.Lock()
	sb.spec.Command = command
	sb.mu.Unlock()
	return sb.Go(extraEnv...)
}

// Go releases the command, with extra KEY=VALUE variables (the bridge URL, say).
func (sb *Sandbox) Go(extraEnv ...string) error {
	sb.mu.Lock()
	if len(sb.spec.Command) == 0 && !sb.spec.probe {
		sb.mu.Unlock()
		return errors.New("sandbox: no command to run")
	}
	if sb.went || sb.killed {
		sb.mu.Unlock()
		return errors.New("sandbox: Go called twice or after Kill")
	}
	sb.went = true
	sb.mu.Unlock()
	dir := sb.spec.Dir
	if dir == "" {
		dir = sb.sc.work
	}
	run := &goConfig{Command: sb.spec.Command, Env: buildEnv(&sb.spec, sb.sc, sb.proxyURL, extraEnv), Dir: dir, TTY: sb.spec.TTY}
	if err := sendMsg(sb.ctl, stubMsg{Go: true, Run: run}); err != nil {
		sb.Kill()
		return fmt.Errorf("release the command: %w", err)
	}
	if sb.spec.Timeout > 0 {
		sb.afterFunc(sb.spec.Timeout, sb.expire)
	}
	return nil
}

func (sb *Sandbox) afterFunc(d time.Duration, f func()) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.timers = append(sb.timers, time.AfterFunc(d, f))
}

// expire is the timeout: SIGTERM, then Grace, then kill.
func (sb *Sandbox) expire() {
	sb.mu.Lock()
	sb.timedOut = true
	sb.mu.Unlock()
	sb.log.Warn("sandbox timeout: sending SIGTERM", "timeout", sb.spec.Timeout)
	sb.Signal(unix.SIGTERM)
}

// Signal forwards sig to the command's process group. A second signal, or the first
// one's grace period running out, kills the sandbox.
func (sb *Sandbox) Signal(sig syscall.Signal) {
	sb.mu.Lock()
	sb.signals++
	n, went := sb.signals, sb.went
	sb.mu.Unlock()
	if n > 1 || !went {
		sb.Kill()
		return
	}
	_ = sb.stub.Process.Signal(sig)
	sb.afterFunc(sb.spec.Grace, sb.Kill)
}

// Kill ends every process of the sandbox at once.
func (sb *Sandbox) Kill() {
	sb.mu.Lock()
	sb.killed = true
	sb.mu.Unlock()
	if sb.stub != nil && sb.stub.Process != nil {
		// os.Process signals through a pidfd: no risk of hitting a recycled PID.
		_ = sb.stub.Process.Kill()
	}
	sb.cg.kill()
}

// readMessages collects what the stub reports after "ready" until it exits.
func (sb *Sandbox) readMessages() {
	defer close(sb.readerDone)
	for {
		m, files, err := recvMsg(sb.ctl)
		for _, f := range files {
			f.Close()
		}
		if err != nil {
			return
		}
		sb.msgs <- m
	}
}

// Wait waits for the command to end, tears the sandbox down and reports. Calling it
// without Go aborts the run. It may be called more than once.
func (sb *Sandbox) Wait() Outcome {
	sb.waitOnce.Do(func() { sb.outcome = sb.finish() })
	return sb.outcome
}

func (sb *Sandbox) finish() Outcome {
	sb.mu.Lock()
	went := sb.went
	sb.mu.Unlock()
	if !went {
		sb.Kill()
	}
	out := Outcome{ExitCode: -1, CgroupMode: sb.cgMode, Scratch: sb.sc.root}
	var exit *stubExit
	var started bool
	stubErr := <-sb.stubErr
	t0 := time.Now()
	// The stub is gone, so the socket is at EOF: the reader ends promptly.
	<-sb.readerDone
	for len(sb.msgs) > 0 {
		m := <-sb.msgs
		if m.Exit != nil {
			exit = m.Exit
		}
		if m.Started != 0 {
			started = true
		}
		if m.Error != "" {
			out.Err = errors.New("sandbox: " + m.Error)
		}
	}
	sb.mu.Lock()
	for _, t := range sb.timers {
		t.Stop()
	}
	out.TimedOut, out.Killed = sb.timedOut, sb.killed
	sb.mu.Unlock()

	switch {
	case exit != nil:
		out.ExitCode, out.Signal = exit.Code, exit.Signal
		if exit.ExecError != "" {
			out.StartError = exit.ExecError
		}
		for _, s := range exit.Survivors {
			sb.viol.add(ViolationKilledCleanup, fmt.Sprintf("pid %d (%s) was still running when the command ended", s.PID, s.Comm))
		}
	case out.Killed && went:
		// Killed with the whole namespace: the command died of SIGKILL.
		out.Signal, out.ExitCode = int(unix.SIGKILL), 128+int(unix.SIGKILL)
		if !started {
			out.StartError = "killed before the command started"
		}
	case went && out.Err == nil:
		out.Err = fmt.Errorf("sandbox stub ended without reporting the command's status: %v", stubErr)
	}
	sb.teardown(&out)
	out.Teardown = time.Since(t0)
	return out
}

// teardown: stats, kill and remove the cgroups, stop relays, drain the pty, remove the
// scratch directory. Every step runs even when an earlier one failed.
func (sb *Sandbox) teardown(out *Outcome) {
	var errs []error
	if sb.cg != nil {
		out.Stats = sb.cg.stats()
		if err := sb.cg.killAndRemove(2 * time.Second); err != nil {
			errs = append(errs, err)
		}
		if out.Stats.OOMKills > 0 {
			sb.viol.add(ViolationOOMKill, fmt.Sprintf("%d process(es) killed at the memory limit of %d bytes", out.Stats.OOMKills, sb.spec.Limits.MemoryBytes))
		}
		if out.Stats.PidsLimitHits > 0 {
			sb.viol.add(ViolationPidsLimit, fmt.Sprintf("%d fork/clone call(s) failed at the pids limit of %d", out.Stats.PidsLimitHits, sb.spec.Limits.Pids))
		}
	}
	sb.closeRelays()
	if sb.tty != nil {
		sb.tty.finish(time.Second)
	}
	if sb.ctl >= 0 {
		unix.Close(sb.ctl)
		sb.ctl = -1
	}
	if !sb.spec.KeepScratch {
		if err := sb.sc.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	out.Violations = sb.viol.list()
	if err := errors.Join(errs...); err != nil {
		if out.Err == nil {
			out.Err = fmt.Errorf("sandbox teardown: %w", err)
		} else {
			out.Err = errors.Join(out.Err, err)
		}
	}
}

func (sb *Sandbox) closeRelays() {
	for _, w := range sb.netwatch {
		// A deadline of now lets the watcher read what is queued, then stop.
		_ = w.f.SetReadDeadline(time.Now())
		<-w.done
		w.f.Close()
	}
	sb.netwatch = nil
	for _, l := range sb.relayLs {
		l.Close()
	}
	for _, l := range sb.listeners {
		l.Close()
	}
	sb.conns.closeAll()
}

// abort undoes a Start that failed half-way.
func (sb *Sandbox) abort() {
	if sb.stub != nil {
		_ = sb.stub.Process.Kill()
		<-sb.stubErr
	}
	if sb.tty != nil {
		sb.tty.finish(0)
	}
	if sb.cg != nil {
		if err := sb.cg.killAndRemove(2 * time.Second); err != nil {
			sb.log.Error("sandbox abort", "err", err)
		}
	}
	sb.closeRelays()
	if sb.ctl >= 0 {
		unix.Close(sb.ctl)
	}
	if sb.sc != nil {
		if err := sb.sc.remove(); err != nil {
			sb.log.Error("sandbox abort", "err", err)
		}
	}
}
