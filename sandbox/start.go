package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox is one started run. Serve on its listeners, call Go, then Wait.
type Sandbox struct {
	spec   Spec
	log    *slog.Logger
	sc     *scratch
	cg     *cgroupSet
	cgMode CgroupMode
	// CgroupWarning is set when the run has no cgroup (and why).
	cgWarn string

	ctl        int
	stub       *exec.Cmd
	stubErr    chan error // the stub's Wait result
	msgs       chan stubMsg
	readerDone chan struct{}

	listeners map[string]net.Listener
	relayLs   []net.Listener
	conns     *connSet
	proxyURL  string
	netwatch  []watcher // raw TCP sockets inside the namespace
	tty       *ttyRelay
	viol      *violationLog

	mu       sync.Mutex
	went     bool
	signals  int
	killed   bool
	timedOut bool
	timers   []*time.Timer
	env      []string

	waitOnce sync.Once
	outcome  Outcome
}

type watcher struct {
	f    *os.File
	done chan struct{}
}

// cgroupFix is the advice given when a run gets no cgroup.
const cgroupFix = "run as root, or start sharedos-run in a delegated cgroup (systemd-run --user --scope -p Delegate=yes …)"

// Start sets up the sandbox and returns once the stub is ready: listeners open inside,
// mount view built, nothing of the command run yet. The caller must call Wait (after Go,
// or instead of it to abort).
func Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	if spec.Grace == 0 {
		spec.Grace = DefaultGrace
	}
	askedLimits := spec.Limits != Limits{}
	if spec.Limits.Pids == 0 {
		spec.Limits.Pids = DefaultPids
	}
	if spec.Logger == nil {
		spec.Logger = slog.New(slog.DiscardHandler)
	}
	sb := &Sandbox{spec: spec, log: spec.Logger, ctl: -1, viol: newViolationLog(), conns: newConnSet(),
		listeners: map[string]net.Listener{}, msgs: make(chan stubMsg, 4), readerDone: make(chan struct{}),
		stubErr: make(chan error, 1)}
	if err := sb.checkPaths(); err != nil {
		return nil, err
	}
	mode := sb.spec.cgroupMode
	if mode == "" {
		mode = HostCgroupMode()
	}
	name := runName()
	own := readOwnCgroups()
	// The scratch directory (and the sweep of what dead launchers left) is not needed
	// before the handshake: make it while the cgroups are made and the stub starts.
	filesDone := make(chan error, 1)
	go func() {
		sweepStale(own, mode, sb.spec.ScratchParent, sb.log)
		sc, err := newScratch(sb.spec.ScratchParent, name)
		sb.sc = sc
		filesDone <- err
	}()
	var filesErr error
	joined := false
	joinFiles := func() error {
		if !joined {
			filesErr, joined = <-filesDone, true
		}
		return filesErr
	}
	ok := false
	defer func() {
		if !ok {
			_ = joinFiles()
			sb.abort()
		}
	}()
	if err := sb.prepareCgroup(askedLimits, own, mode, name); err != nil {
		return nil, err
	}
	if err := sb.startStub(); err != nil {
		return nil, err
	}
	if err := joinFiles(); err != nil {
		return nil, err
	}
	if err := sb.handshake(ctx); err != nil {
		return nil, err
	}
	ok = true
	go sb.readMessages()
	return sb, nil
}

// checkPaths resolves the directories the spec names and checks that they exist.
func (sb *Sandbox) checkPaths() error {
	s := &sb.spec
	for i, w := range s.Writable {
		p, err := realDir(w)
		if err != nil {
			return fmt.Errorf("--writable %s: %w", w, err)
		}
		s.Writable[i] = p
	}
	for i, v := range s.Visible {
		p, err := realDir(v)
		if err != nil {
			return fmt.Errorf("visible directory %s: %w", v, err)
		}
		s.Visible[i] = p
	}
	if s.Dir != "" {
		p, err := realDir(s.Dir)
		if err != nil {
			return fmt.Errorf("working directory %s: %w", s.Dir, err)
		}
		s.Dir = p
	}
	return nil
}

// runName names the run's scratch directory and cgroups: sharedos-run-PID-RANDOM (the
// sweep of stale ones goes by the PID).
func runName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("sharedos-run-%d-%d", os.Getpid(), binary.BigEndian.Uint32(b[:]))
}

func realDir(p string) (string, error) {
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", errors.New("not a directory")
	}
	return p, nil
}

func (sb *Sandbox) prepareCgroup(askedLimits bool, own *ownCgroups, mode CgroupMode, name string) error {
	cg, err := newCgroupSetIn(own, mode, name, sb.spec.Limits)
	if err == nil {
		sb.cg, sb.cgMode = cg, mode
		return nil
	}
	sb.cgMode = CgroupNone
	switch {
	case sb.spec.RequireCgroup:
		return fmt.Errorf("--require-cgroup: no cgroup for this run: %w; %s", err, cgroupFix)
	case askedLimits:
		return fmt.Errorf("limits were asked for but no cgroup can be had: %w; %s", err, cgroupFix)
	}
	sb.cgWarn = fmt.Sprintf("running without a cgroup (no limits, no stats; the PID namespace still ends every process): %v; %s", err, cgroupFix)
	// The caller shows CgroupWarning to the user (once); this is the diagnostic trail.
	sb.log.Info("sandbox without cgroup", "reason", sb.cgWarn)
	return nil
}

// startStub re-executes this binary as the stub in new namespaces. The fork happens on a
// locked thread that lives until the stub is reaped: Pdeathsig follows the thread.
func (sb *Sandbox) startStub() error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("control socketpair: %w", err)
	}
	sb.ctl = fds[0]
	child := os.NewFile(uintptr(fds[1]), "stub-ctl")
	defer child.Close()

	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"sharedos-run", StubArg},
		Env:        []string{},
		ExtraFiles: []*os.File{child},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
			Pdeathsig:  syscall.SIGKILL,
			// Our own group: the caller's terminal signals reach the launcher, which
			// forwards them once.
			Setpgid: true,
		},
	}
	if os.Geteuid() != 0 {
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
		// With an identity map the stub is not uid 0 in its namespace, so execve would
		// drop the namespace's capabilities; ambient ones survive it. The stub drops them
		// all again before the command runs.
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_NET_RAW, unix.CAP_SETPCAP}
	}
	if fd := sb.cg.cgroupFD(); fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = fd
	}
	if sb.spec.TTY {
		t, err := openTTY(sb.spec.Stdin)
		if err != nil {
			return err
		}
		sb.tty = t
		cmd.Stdin, cmd.Stdout, cmd.Stderr = t.tty, t.tty, t.tty
	} else {
		in, err := stdinFile(sb.spec.Stdin)
		if err != nil {
			return err
		}
		if in != nil {
			cmd.Stdin = in
			if in != sb.spec.Stdin {
				defer in.Close() // our pipe's read end: the stub has its own copy
			}
		}
		cmd.Stdout, cmd.Stderr = sb.spec.Stdout, sb.spec.Stderr
	}
	sb.stub = cmd

	type startResult struct {
		err    error
		placed bool // born in the v1 groups (else: place it now)
		stuck  bool // this thread could not leave the v1 groups
	}
	started := make(chan startResult, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		// On v1 the stub is forked from inside the groups (see enterV1).
		leave, err := sb.cg.enterV1()
		if err != nil {
			if errors.Is(err, errThreadStuck) {
				started <- startResult{err: fmt.Errorf("enter the run's cgroups: %w", err), stuck: true}
				return
			}
			sb.log.Debug("sandbox: placing the stub in the v1 cgroups after the fork", "reason", err)
			leave = nil
		}
		err = cmd.Start()
		if leave != nil {
			if lerr := leave(); lerr != nil {
				// Fail closed, and end this thread (it returns locked) so that the
				// groups empty: Pdeathsig would kill the stub anyway.
				if err == nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
				started <- startResult{err: fmt.Errorf("leave the run's cgroups: %w", lerr), stuck: true}
				return
			}
		}
		if err != nil {
			started <- startResult{err: err}
			return
		}
		started <- startResult{placed: leave != nil}
		sb.stubErr <- cmd.Wait()
	}()
	r := <-started
	if r.err != nil {
		sb.stub = nil
		if r.stuck {
			return fmt.Errorf("start the sandbox stub: %w", r.err)
		}
		return fmt.Errorf("start the sandbox stub in new namespaces: %w%s", r.err, namespaceHint(r.err))
	}
	if sb.tty != nil {
		sb.tty.closeSlave()
		sb.tty.start(sb.spec.Stdin, sb.spec.Stdout)
	}
	if r.placed {
		return nil
	}
	return sb.cg.place(cmd.Process.Pid)
}

// stdinFile turns a non-file stdin into a pipe fed by a goroutine nobody waits for:
// exec.Cmd would wait for its own copier, which ends only at EOF of a reader the
// caller may hold open forever.
func stdinFile(r io.Reader) (*os.File, error) {
	switch in := r.(type) {
	case nil:
		return nil, nil
	case *os.File:
		return in, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	go func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	}()
	return pr, nil
}

// namespaceHint explains the usual reasons a clone with new namespaces is refused.
func namespaceHint(err error) string {
	if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EACCES) {
		return ""
	}
	if os.Geteuid() == 0 {
		return " (namespaces are refused even to root: a seccomp filter or container runtime forbids them; run on a host or a privileged container)"
	}
	return " (unprivileged user namespaces are forbidden here: enable them with sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces>0, or allow them in AppArmor (kernel.apparmor_restrict_unprivileged_userns=0), or run sharedos-run as root)"
}

// handshake sends the config and waits for "ready" with the listeners.
func (sb *Sandbox) handshake(ctx context.Context) error {
	cfg := stubConfig{Probe: sb.spec.probe, Mounts: sb.mountPlan()}
	for _, n := range sb.spec.Listeners {
		cfg.Listeners = append(cfg.Listeners, listenSpec{Name: "user:" + n, Host: "127.0.0.1"})
	}
	if len(sb.spec.AllowEgress) > 0 {
		cfg.Listeners = append(cfg.Listeners, listenSpec{Name: "proxy", Host: "127.0.0.1"})
	}
	for _, p := range sb.spec.AllowLoopback {
		cfg.Listeners = append(cfg.Listeners,
			listenSpec{Name: "mirror4:" + strconv.Itoa(p), Host: "127.0.0.1", Port: p},
			listenSpec{Name: "mirror6:" + strconv.Itoa(p), Host: "::1", Port: p, Optional: true})
	}
	if err := sendMsg(sb.ctl, stubMsg{Config: &cfg}); err != nil {
		return fmt.Errorf("send the stub its config: %w", err)
	}
	type reply struct {
		m     stubMsg
		files []*os.File
		err   error
	}
	ch := make(chan reply, 1)
	go func() {
		m, files, err := recvMsg(sb.ctl)
		ch <- reply{m, files, err}
	}()
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("set up the sandbox: %w", ctx.Err())
	}
	if r.err != nil {
		return fmt.Errorf("set up the sandbox: stub: %w", r.err)
	}
	if r.m.Error != "" {
		return fmt.Errorf("set up the sandbox: %s", r.m.Error)
	}
	if !r.m.Ready || len(r.files) != len(r.m.Opened) {
		for _, f := range r.files {
			f.Close()
		}
		return errors.New("set up the sandbox: stub sent no listeners")
	}
	return sb.adoptListeners(r.m.Opened, r.files)
}

func (sb *Sandbox) adoptListeners(names []string, files []*os.File) error {
	var policy *egressPolicy
	if len(sb.spec.AllowEgress) > 0 {
		var err error
		if policy, err = newEgressPolicy(sb.spec.AllowEgress); err != nil {
			return err
		}
	}
	var firstErr error
	for i, f := range files {
		name := names[i]
		if name == "netwatch" {
			if w, err := pollable(f); err == nil {
				done := make(chan struct{})
				sb.netwatch = append(sb.netwatch, watcher{w, done})
				go func() {
					defer close(done)
					watchRefusals(w, sb.viol)
				}()
			}
			continue
		}
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("adopt listener %s: %w", names[i], err)
			}
			continue
		}
		switch {
		case len(name) > 5 && name[:5] == "user:":
			sb.listeners[name[5:]] = l
		case name == "proxy":
			sb.relayLs = append(sb.relayLs, l)
			sb.proxyURL = "http://" + l.Addr().String()
			p := &egressProxy{policy: policy, viol: sb.viol, log: sb.log, conns: sb.conns}
			serveLoop(l, sb.conns, p.handle)
		default: // mirror4:PORT, mirror6:PORT
			port, _ := strconv.Atoi(name[len("mirror4:"):])
			sb.relayLs = append(sb.relayLs, l)
			m := &mirror{port: port, conns: sb.conns}
			serveLoop(l, sb.conns, m.handle)
		}
	}
	return firstErr
}

// mountPlan: hide the shared temporary and runtime directories and the caller's HOME;
// keep the scratch directory (writable), the working directory and --writable paths.
func (sb *Sandbox) mountPlan() mountPlan {
	p := mountPlan{Hide: []string{"/run", "/var/run", "/tmp", "/dev/shm"}}
	// Both the HOME the caller runs with and the account's own.
	homes := []string{os.Getenv("HOME")}
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil {
		homes = append(homes, u.HomeDir)
	}
	for _, home := range homes {
		if h, err := filepath.EvalSymlinks(home); err == nil && h != "/" && filepath.IsAbs(h) && !slices.Contains(p.Hide, h) {
			p.Hide = append(p.Hide, h)
		}
	}
	writable := map[string]bool{}
	for _, w := range sb.spec.Writable {
		writable[w] = true
		sb.viol.add(ViolationWritable, w+" is writable inside the sandbox (asked for)")
	}
	binds := map[string]bool{sb.sc.root: true}
	for w := range writable {
		binds[w] = true
	}
	if sb.spec.Dir != "" {
		binds[sb.spec.Dir] = writable[sb.spec.Dir]
	}
	for _, v := range sb.spec.Visible {
		binds[v] = writable[v]
	}
	for path, w := range binds {
		p.Binds = append(p.Binds, bindSpec{Path: path, Writable: w})
	}
	// Parents first, so that a later bind never covers an earlier one.
	sort.Slice(p.Binds, func(i, j int) bool { return len(p.Binds[i].Path) < len(p.Binds[j].Path) })
	return p
}
