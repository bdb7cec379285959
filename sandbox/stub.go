package sandbox

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"runtime"

	"golang.org/x/sys/unix"
)

// StubArg is the hidden first argument that makes the binary run as the sandbox stub.
// main must check for it before anything else and call [RunStub].
const StubArg = "__sharedos-run-sandbox-stub"

// ctlFD is the control socket's descriptor number in the stub (ExtraFiles[0]).
const ctlFD = 3

// goConfig comes with "go": what to run. It is sent late so that the caller can add
// variables that depend on the listeners (the bridge URL, say).
type goConfig struct {
	Command []string `json:"command,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir"`
	TTY     bool     `json:"tty,omitempty"`
}

// RunStub is the stub's whole life; it returns the exit status for os.Exit. It runs
// inside the new namespaces as their first process and must be called before the
// program starts anything else.
func RunStub() int {
	// Capabilities and no_new_privs are per thread: everything that must hold for the
	// command happens on this thread, which also forks it.
	runtime.LockOSThread()
	unix.CloseOnExec(ctlFD)
	cfg, err := recvConfig()
	if err != nil {
		stubFail(fmt.Errorf("read config: %w", err))
		return 1
	}
	files, names, err := stubSetup(cfg)
	if err != nil {
		stubFail(err)
		return 1
	}
	err = sendMsg(ctlFD, stubMsg{Ready: true, Opened: names}, files...)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		return 1
	}
	// Install the forwarding of signals while the launcher prepares "go": the first
	// signal.Notify starts the runtime's signal machinery, a fraction of a millisecond
	// otherwise spent between "go" and the command. Before "go" nothing signals the stub
	// but a kill (the launcher kills instead of forwarding until the command is released).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	m, _, err := recvMsg(ctlFD)
	if err != nil || m.Go == false || m.Run == nil {
		// The launcher gave up before "go": nothing was run.
		return 1
	}
	if cfg.Probe {
		_ = sendMsg(ctlFD, stubMsg{Exit: &stubExit{}})
		return 0
	}
	if err := dropPrivileges(); err != nil {
		stubFail(fmt.Errorf("drop privileges: %w", err))
		return 1
	}
	ex := runAsInit(*m.Run, sigs)
	_ = sendMsg(ctlFD, stubMsg{Exit: &ex})
	return ex.Code
}

func stubFail(err error) {
	_ = sendMsg(ctlFD, stubMsg{Error: err.Error()})
}

func recvConfig() (*stubConfig, error) {
	m, _, err := recvMsg(ctlFD)
	if err != nil {
		return nil, err
	}
	if m.Config == nil {
		return nil, errors.New("first message carries no config")
	}
	return m.Config, nil
}

// stubSetup brings the network up, opens the listeners and builds the mount view.
func stubSetup(cfg *stubConfig) ([]*os.File, []string, error) {
	if err := loopbackUp(); err != nil {
		return nil, nil, fmt.Errorf("bring lo up: %w", err)
	}
	var files []*os.File
	var names []string
	for _, ls := range cfg.Listeners {
		f, err := listenFile(ls)
		if err != nil {
			if ls.Optional {
				continue
			}
			for _, f := range files {
				f.Close()
			}
			return nil, nil, fmt.Errorf("listen %s on %s port %d: %w", ls.Name, ls.Host, ls.Port, err)
		}
		files = append(files, f)
		names = append(names, ls.Name)
	}
	// Best effort: without it, refused attempts are only missing from the log.
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		if f, err := openRawTCP(family); err == nil {
			files = append(files, f)
			names = append(names, "netwatch")
		}
	}
	if err := buildMountView(cfg.Mounts); err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, fmt.Errorf("mount view: %w", err)
	}
	return files, names, nil
}

// listenFile opens a listening TCP socket on ls.Host:ls.Port with plain system calls, as
// net.Listen would (SO_REUSEADDR; IPV6_V6ONLY for ::1; the kernel caps the backlog at
// net.core.somaxconn) without its probes of the host (IPv6 and MPTCP support,
// somaxconn): the stub starts once per run.
func listenFile(ls listenSpec) (*os.File, error) {
	ip, err := netip.ParseAddr(ls.Host)
	if err != nil {
		return nil, err
	}
	var family int
	var sa unix.Sockaddr
	if ip.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: ls.Port, Addr: ip.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: ls.Port, Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return nil, os.NewSyscallError("setsockopt", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, os.NewSyscallError("setsockopt", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		return nil, os.NewSyscallError("listen", err)
	}
	ok = true
	return os.NewFile(uintptr(fd), "listener"), nil
}

// loopbackUp sets IFF_UP on lo: a new network namespace starts with lo down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
