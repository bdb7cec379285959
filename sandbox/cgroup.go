package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cgroups "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// CgroupMode says how a run was (or can be) put in a cgroup.
type CgroupMode string

const (
	// CgroupUnified: cgroup v2 only; one group, placed atomically, cgroup.kill.
	CgroupUnified CgroupMode = "unified"
	// CgroupHybrid: v1 controllers plus a controller-less v2 mount; v1 groups for the
	// limits and a v2 group for atomic placement and cgroup.kill.
	CgroupHybrid CgroupMode = "hybrid"
	// CgroupLegacy: v1 only; the stub is born in the groups (forked from a launcher
	// thread inside them, see enterV1), kill is freeze+SIGKILL.
	CgroupLegacy CgroupMode = "legacy"
	// CgroupNone: no cgroup (none mounted or none writable).
	CgroupNone CgroupMode = "none"
)

const cgroupRoot = "/sys/fs/cgroup"

// v1Controllers are the v1 hierarchies a run uses: limits, stats, and the freezer for
// the kill.
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu, cgroup1.Cpuacct, cgroup1.Freezer}

// HostCgroupMode reports the host's cgroup layout (not whether it is writable).
func HostCgroupMode() CgroupMode {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return CgroupUnified
	case cgroups.Hybrid:
		return CgroupHybrid
	case cgroups.Legacy:
		return CgroupLegacy
	}
	return CgroupNone
}

// cgroupSet is one run's groups: a v2 group (unified, or the controller-less one of a
// hybrid host) and/or v1 groups.
type cgroupSet struct {
	mode   CgroupMode
	v2     *cgroup2.Manager
	v2Path string
	v2Dir  *os.File // for clone3(CLONE_INTO_CGROUP)
	v1     cgroup1.Cgroup
	v1Path map[cgroup1.Name]string
}

// newCgroupSet creates the groups for one run, named name, under the launcher's own.
func newCgroupSet(mode CgroupMode, name string, lim Limits) (*cgroupSet, error) {
	return newCgroupSetIn(readOwnCgroups(), mode, name, lim)
}

// newCgroupSetIn is newCgroupSet under the launcher's groups as already read.
func newCgroupSetIn(own *ownCgroups, mode CgroupMode, name string, lim Limits) (*cgroupSet, error) {
	cs := &cgroupSet{mode: mode}
	ok := false
	defer func() {
		if !ok {
			cs.remove()
		}
	}()
	switch mode {
	case CgroupUnified:
		if err := cs.makeV2(own, cgroupRoot, name, v2Resources(lim)); err != nil {
			return nil, err
		}
	case CgroupHybrid:
		if err := cs.makeV2(own, filepath.Join(cgroupRoot, "unified"), name, &cgroup2.Resources{}); err != nil {
			return nil, err
		}
		if err := cs.makeV1(own, name, lim); err != nil {
			return nil, err
		}
	case CgroupLegacy:
		if err := cs.makeV1(own, name, lim); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("no cgroup hierarchy is mounted at " + cgroupRoot)
	}
	ok = true
	return cs, nil
}

func v2Resources(lim Limits) *cgroup2.Resources {
	r := &cgroup2.Resources{Pids: &cgroup2.Pids{Max: lim.Pids}}
	if lim.MemoryBytes > 0 {
		m, swap := lim.MemoryBytes, int64(0)
		r.Memory = &cgroup2.Memory{Max: &m, Swap: &swap}
	}
	if lim.CPUs > 0 {
		q, p := int64(lim.CPUs*100000), uint64(100000)
		r.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&q, &p)}
	}
	return r
}

// ownCgroup2 is the launcher's own path on the unified hierarchy ("0::/path").
func ownCgroup2() (string, error) {
	_, unified, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	if unified == "" {
		return "/", nil
	}
	return unified, nil
}

// ownCgroups is where the launcher sits, read once per run: /proc/self/cgroup and the
// cgroup mounts of /proc/self/mountinfo are read once (cgroup1.NestedPath reads
// mountinfo once per controller, and was called twice per run; reading /proc/self/cgroup
// takes the global cgroup_mutex, contended when other runs start or end).
type ownCgroups struct {
	err     error             // reading /proc/self/cgroup
	unified string            // the unified group ("0::/path"), "/" when none
	v1      map[string]string // controller → group, localized as cgroup1.NestedPath does
	v1Err   error             // no v1 paths (as cgroup1.NestedPath would fail)
}

func readOwnCgroups() *ownCgroups {
	v1, unified, err := cgroups.ParseCgroupFileUnified("/proc/self/cgroup")
	if err != nil {
		return &ownCgroups{err: err, v1Err: err}
	}
	if unified == "" {
		unified = "/"
	}
	own := &ownCgroups{unified: unified, v1: map[string]string{}}
	if len(v1) == 0 {
		return own
	}
	roots, err := cgroupMountRoots()
	if err != nil {
		own.v1Err = err
		return own
	}
	// As cgroup1.NestedPath (existingPath): relative to the root of the controller's
	// mount, for a launcher in a cgroup namespace or a bind-mounted hierarchy.
	for n, p := range v1 {
		dest, ok := roots[n]
		if !ok {
			own.v1Err = cgroup1.ErrNoCgroupMountDestination
			return own
		}
		rel, err := filepath.Rel(dest, p)
		if err != nil {
			own.v1Err = err
			return own
		}
		if rel == "." {
			rel = dest
		}
		own.v1[n] = filepath.Join("/", rel)
	}
	return own
}

// cgroupMountRoots maps each v1 mount option (controller, name=…) to the root of the
// first cgroup mount that has it, from one read of /proc/self/mountinfo.
func cgroupMountRoots() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	roots := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Split(line, " ")
		if len(fields) < 10 || fields[len(fields)-3] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(fields[len(fields)-1], ",") {
			if _, ok := roots[opt]; !ok {
				roots[opt] = fields[3]
			}
		}
	}
	return roots, nil
}

// v1Path is cgroup1.NestedPath(suffix) from the groups already read.
func (o *ownCgroups) v1Path(suffix string) cgroup1.Path {
	return func(name cgroup1.Name) (string, error) {
		if o.v1Err != nil {
			return "", o.v1Err
		}
		root, ok := o.v1[string(name)]
		if !ok {
			if root, ok = o.v1["name="+string(name)]; !ok {
				return "", cgroup1.ErrControllerNotActive
			}
		}
		if suffix != "" {
			return filepath.Join(root, suffix), nil
		}
		return root, nil
	}
}

func (cs *cgroupSet) makeV2(own *ownCgroups, mount, name string, res *cgroup2.Resources) error {
	if own.err != nil {
		return fmt.Errorf("read own cgroup: %w", own.err)
	}
	group := filepath.Join(own.unified, name)
	m, err := cgroup2.NewManager(mount, group, res)
	if err != nil {
		return fmt.Errorf("create cgroup %s: %w", filepath.Join(mount, group), err)
	}
	cs.v2, cs.v2Path = m, filepath.Join(mount, group)
	f, err := os.OpenFile(cs.v2Path, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open cgroup %s: %w", cs.v2Path, err)
	}
	cs.v2Dir = f
	return nil
}

func (cs *cgroupSet) makeV1(own *ownCgroups, name string, lim Limits) error {
	var subs []cgroup1.Subsystem
	for _, n := range v1Controllers {
		if _, err := os.Stat(filepath.Join(cgroupRoot, string(n))); err != nil {
			return fmt.Errorf("cgroup v1 controller %s is not mounted at %s", n, cgroupRoot)
		}
		switch n {
		case cgroup1.Memory:
			subs = append(subs, cgroup1.NewMemory(cgroupRoot))
		case cgroup1.Pids:
			subs = append(subs, cgroup1.NewPids(cgroupRoot))
		case cgroup1.Cpu:
			subs = append(subs, cgroup1.NewCpu(cgroupRoot))
		case cgroup1.Cpuacct:
			subs = append(subs, cgroup1.NewCpuacct(cgroupRoot))
		case cgroup1.Freezer:
			subs = append(subs, cgroup1.NewFreezer(cgroupRoot))
		}
	}
	res := &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &lim.Pids}}
	if lim.MemoryBytes > 0 {
		m := lim.MemoryBytes
		res.Memory = &specs.LinuxMemory{Limit: &m}
	}
	if lim.CPUs > 0 {
		q, p := int64(lim.CPUs*100000), uint64(100000)
		res.CPU = &specs.LinuxCPU{Quota: &q, Period: &p}
	}
	path := own.v1Path(name)
	cg, err := cgroup1.New(path, res,
		cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return subs, nil }),
		func(c *cgroup1.InitConfig) error {
			// Every controller is needed: none may be skipped silently.
			c.InitCheck = func(_ cgroup1.Subsystem, _ cgroup1.Path, err error) error { return err }
			return nil
		})
	if err != nil {
		// New may have created some of the directories before failing.
		cs.v1Path = v1Paths(path)
		return fmt.Errorf("create cgroup v1 groups %s: %w", name, err)
	}
	cs.v1, cs.v1Path = cg, v1Paths(path)
	if lim.MemoryBytes > 0 {
		// No swap either, where the kernel accounts it.
		sw := filepath.Join(cs.v1Path[cgroup1.Memory], "memory.memsw.limit_in_bytes")
		if _, err := os.Stat(sw); err == nil {
			if err := os.WriteFile(sw, []byte(fmt.Sprint(lim.MemoryBytes)), 0); err != nil {
				return fmt.Errorf("set %s: %w", sw, err)
			}
		}
	}
	return nil
}

func v1Paths(path cgroup1.Path) map[cgroup1.Name]string {
	out := map[cgroup1.Name]string{}
	for _, n := range v1Controllers {
		if p, err := path(n); err == nil {
			out[n] = filepath.Join(cgroupRoot, string(n), p)
		}
	}
	return out
}

// cgroupFD is the v2 directory to start the stub in (-1: none; v1 groups are entered by
// the forking thread, enterV1).
func (cs *cgroupSet) cgroupFD() int {
	if cs == nil || cs.v2Dir == nil {
		return -1
	}
	return int(cs.v2Dir.Fd())
}

// enterV1 moves the calling thread, which must be locked to its goroutine, into the
// run's v1 groups, so that the stub it forks is born in them: nothing of the stub, let
// alone the command, runs outside the groups. It returns the way back, to be called
// right after the fork.
//
// Why the thread and not the stub: moving a process (writing a PID to cgroup.procs, as
// place does) takes the global cgroup_threadgroup_rwsem for writing, which waits for an
// RCU grace period: 7–30 ms per run on this kind of host, the largest single cost of a
// launch. A thread that moves itself (writing "0" to tasks) skips that lock (Linux
// ≥ 6.0, cgroup_procs_write_start); a child inherits the cgroups of the thread that
// forks it.
//
// It fails, having moved nothing, when the thread's own groups cannot be read or their
// tasks files are not writable (no way back); the caller then falls back to place.
func (cs *cgroupSet) enterV1() (leave func() error, err error) {
	if cs == nil || cs.v1 == nil {
		return func() error { return nil }, nil
	}
	own, err := threadV1Paths()
	if err != nil {
		return nil, err
	}
	type move struct{ to, back string }
	var moves []move
	for _, n := range v1Controllers {
		to, ok := cs.v1Path[n]
		rel, found := own[string(n)]
		if !ok || !found {
			return nil, fmt.Errorf("cgroup v1 %s: no group for this thread", n)
		}
		back := filepath.Join(cgroupRoot, string(n), rel, "tasks")
		if err := unix.Access(back, unix.W_OK); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s: cannot move back to %s: %w", n, back, err)
		}
		moves = append(moves, move{filepath.Join(to, "tasks"), back})
	}
	leave = func() error {
		var errs []error
		for _, m := range moves {
			if err := writeSelfTask(m.back); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for i, m := range moves {
		if err := writeSelfTask(m.to); err != nil {
			moves = moves[:i]
			if berr := leave(); berr != nil {
				return nil, errors.Join(err, berr, errThreadStuck)
			}
			return nil, err
		}
	}
	return leave, nil
}

// errThreadStuck: a launcher thread could not leave a run's v1 group. The thread must
// end (its goroutine returns while locked) before the group can be removed.
var errThreadStuck = errors.New("a launcher thread is stuck in the run's cgroups")

// writeSelfTask moves the calling thread into the group whose tasks file is path.
func writeSelfTask(path string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("move thread to %s: %w", path, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("0")); err != nil {
		return fmt.Errorf("move thread to %s: %w", path, err)
	}
	return nil
}

// threadV1Paths reads the calling thread's v1 groups (controller → path below the
// controller's mount) from /proc/thread-self/cgroup.
func threadV1Paths() (map[string]string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// place puts pid in the v1 groups; the stub is still waiting, so nothing of the
// command has run yet. The fallback when enterV1 cannot be used.
func (cs *cgroupSet) place(pid int) error {
	if cs == nil || cs.v1 == nil {
		return nil
	}
	if err := cs.v1.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("place the stub in the v1 cgroups: %w", err)
	}
	return nil
}

// kill sends SIGKILL to every process of the run's groups.
func (cs *cgroupSet) kill() {
	if cs == nil {
		return
	}
	if cs.v2Path != "" {
		if err := os.WriteFile(filepath.Join(cs.v2Path, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	if cs.v1 != nil {
		// Freeze so that nothing forks between listing and killing.
		_ = cs.v1.Freeze()
		procs, _ := cs.v1.Processes(cgroup1.Freezer, true)
		for _, p := range procs {
			// Never the launcher itself: one of its threads may be in the groups for
			// a moment (enterV1).
			if p.Pid == os.Getpid() {
				continue
			}
			_ = unix.Kill(p.Pid, unix.SIGKILL)
		}
		_ = cs.v1.Thaw()
	}
}

// empty reports whether no process is left in any of the groups. It reads the
// cgroup.procs files directly: the groups have no children (cgroupfs is read-only in
// the sandbox and the command has no capabilities), and the library's recursive
// listing walks every file of every group.
func (cs *cgroupSet) empty() bool {
	if cs == nil {
		return true
	}
	var files []string
	if cs.v2 != nil {
		files = append(files, filepath.Join(cs.v2Path, "cgroup.procs"))
	}
	if cs.v1 != nil {
		for _, n := range []cgroup1.Name{cgroup1.Freezer, cgroup1.Pids, cgroup1.Memory} {
			if p, ok := cs.v1Path[n]; ok {
				files = append(files, filepath.Join(p, "cgroup.procs"))
			}
		}
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return false
		}
	}
	return true
}

// killAndRemove kills what is left, waits for the groups to empty (bounded) and removes
// them. A group that keeps tasks after the kill is reported.
func (cs *cgroupSet) killAndRemove(wait time.Duration) error {
	if cs == nil {
		return nil
	}
	if !cs.empty() {
		cs.kill()
		deadline := time.Now().Add(wait)
		for !cs.empty() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !cs.empty() {
			return fmt.Errorf("cgroup %s still has tasks %v after SIGKILL", cs.describe(), wait)
		}
	}
	return cs.remove()
}

// remove deletes every group of the set; killAndRemove has seen them empty. The kernel
// refuses to remove a group with tasks (EBUSY), so nothing is lost by not asking the
// library, which lists every group's tasks recursively first.
func (cs *cgroupSet) remove() error {
	if cs.v2Dir != nil {
		cs.v2Dir.Close()
		cs.v2Dir = nil
	}
	var errs []error
	if cs.v2 != nil {
		if err := rmdirCgroup(cs.v2Path); err != nil {
			errs = append(errs, err)
		}
	}
	// Also after a failed New, which may have created some of the directories. Co-mounted
	// controllers (cpu,cpuacct) share one: the second removal finds it gone.
	for _, n := range v1Controllers {
		if p, ok := cs.v1Path[n]; ok {
			if err := rmdirCgroup(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirCgroup removes one group, retrying a little while the kernel still counts a
// task that has just exited.
func rmdirCgroup(p string) error {
	delay := 10 * time.Millisecond
	for i := 0; ; i++ {
		err := unix.Rmdir(p)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || i == 4 {
			return fmt.Errorf("remove cgroup %s: %w", p, err)
		}
		time.Sleep(delay)
		delay *= 2
	}
}

func (cs *cgroupSet) describe() string {
	var parts []string
	if cs.v2Path != "" {
		parts = append(parts, cs.v2Path)
	}
	for _, n := range v1Controllers {
		if p, ok := cs.v1Path[n]; ok {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

// paths lists every directory of the set (tests check that they are gone).
func (cs *cgroupSet) paths() []string {
	var out []string
	if cs.v2Path != "" {
		out = append(out, cs.v2Path)
	}
	for _, p := range cs.v1Path {
		out = append(out, p)
	}
	return out
}
