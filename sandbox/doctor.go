package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Report is what this host can give a run, as `sharedos-run doctor` prints it.
type Report struct {
	UID        int              `json:"uid"`
	Rootless   bool             `json:"rootless"`
	CgroupMode CgroupMode       `json:"cgroupMode"` // the host's layout
	Cgroup     Check            `json:"cgroup"`     // can a run get its groups here
	Writable   map[string]bool  `json:"cgroupWritable"`
	Namespaces map[string]Check `json:"namespaces"`
	Sandbox    Check            `json:"sandbox"` // a full probe run (listeners, mount view)
	PTY        Check            `json:"pty"`
	Problems   []Problem        `json:"problems,omitempty"`
	// OK is false when something a run would need (or asked for) is missing.
	OK bool `json:"ok"`
}

// Check is one capability and why it is missing.
type Check struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Problem is something missing and how to get it.
type Problem struct {
	What string `json:"what"`
	Fix  string `json:"fix"`
}

func check(err error) Check {
	if err != nil {
		return Check{Error: err.Error()}
	}
	return Check{OK: true}
}

// Doctor probes the host. With requireCgroup, a missing cgroup makes the report not OK.
func Doctor(ctx context.Context, requireCgroup bool) Report {
	r := Report{UID: os.Geteuid(), Rootless: os.Geteuid() != 0, CgroupMode: HostCgroupMode(),
		Writable: map[string]bool{}, Namespaces: map[string]Check{}, OK: true}
	problem := func(fatal bool, what, fix string) {
		r.Problems = append(r.Problems, Problem{What: what, Fix: fix})
		if fatal {
			r.OK = false
		}
	}

	for _, ns := range []struct {
		name string
		flag uintptr
	}{{"user", syscall.CLONE_NEWUSER}, {"net", syscall.CLONE_NEWNET}, {"pid", syscall.CLONE_NEWPID}, {"mount", syscall.CLONE_NEWNS}} {
		err := probeClone(ns.flag)
		r.Namespaces[ns.name] = check(err)
		needed := ns.name != "user" || r.Rootless
		if err != nil {
			problem(needed, fmt.Sprintf("%s namespaces: %v", ns.name, err), namespaceHint(err))
		}
	}

	probeCgroupWritable(r.CgroupMode, r.Writable)
	cs, err := newCgroupSet(r.CgroupMode, fmt.Sprintf("sharedos-run-%d-doctor", os.Getpid()), Limits{Pids: DefaultPids})
	if err == nil {
		err = cs.remove()
	}
	r.Cgroup = check(err)
	if err != nil {
		problem(requireCgroup, "cgroups: "+err.Error()+" (runs get no limits or stats; --require-cgroup and --memory/--pids/--cpus fail)", cgroupFix)
	}

	out, err := Start(ctx, Spec{probe: true, cgroupMode: CgroupNone, Listeners: []string{"probe"}})
	if err == nil {
		if err = out.Go(); err == nil {
			if o := out.Wait(); o.Err != nil {
				err = o.Err
			}
		} else {
			out.Wait()
		}
	}
	r.Sandbox = check(err)
	if err != nil {
		problem(true, "sandbox probe: "+err.Error(), "see the namespace problems above; a container needs --privileged or a seccomp profile that allows unshare/mount")
	}

	ptmx, tty, err := pty.Open()
	if err == nil {
		ptmx.Close()
		tty.Close()
	}
	r.PTY = check(err)
	if err != nil {
		problem(false, "pseudo-terminals: "+err.Error()+" (--tty fails)", "mount devpts at /dev/pts with a /dev/ptmx")
	}
	return r
}

// probeClone starts the stub with one namespace flag; the stub exits at once for want of
// a control socket, which is fine: the clone is what is being tested.
func probeClone(flag uintptr) error {
	cmd := exec.Command("/proc/self/exe", StubArg)
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flag}
	if flag == syscall.CLONE_NEWUSER || os.Geteuid() != 0 {
		uid, gid := os.Getuid(), os.Getgid()
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	_ = cmd.Wait()
	return nil
}

// probeCgroupWritable tries to create (and remove) a group in each hierarchy a run uses.
func probeCgroupWritable(mode CgroupMode, out map[string]bool) {
	name := fmt.Sprintf("sharedos-run-%d-probe", os.Getpid())
	try := func(dir string) bool {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return false
		}
		_ = unix.Rmdir(p)
		return true
	}
	if mode == CgroupUnified || mode == CgroupHybrid {
		mount := cgroupRoot
		if mode == CgroupHybrid {
			mount = filepath.Join(cgroupRoot, "unified")
		}
		own, err := ownCgroup2()
		out["unified"] = err == nil && try(filepath.Join(mount, own))
	}
	if mode == CgroupHybrid || mode == CgroupLegacy {
		paths := v1Paths(cgroup1.NestedPath(""))
		for _, n := range v1Controllers {
			p, ok := paths[n]
			out[string(n)] = ok && try(p)
		}
	}
}
