package sandbox

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// sweepStale removes what launchers that were killed outright left behind: cgroups and
// scratch directories named sharedos-run-PID-… whose PID no longer exists. Their
// processes are already gone (Pdeathsig and the PID namespace see to that); only the
// directories remain. Best effort: a group that still has tasks is left alone.
func sweepStale(own *ownCgroups, mode CgroupMode, scratchParent string, log *slog.Logger) {
	var dirs []string
	if mode == CgroupUnified || mode == CgroupHybrid {
		mount := cgroupRoot
		if mode == CgroupHybrid {
			mount = filepath.Join(cgroupRoot, "unified")
		}
		if own.err == nil {
			dirs = append(dirs, filepath.Join(mount, own.unified))
		}
	}
	if mode == CgroupHybrid || mode == CgroupLegacy {
		for _, p := range v1Paths(own.v1Path("")) {
			dirs = append(dirs, p)
		}
	}
	for _, d := range dirs {
		for _, p := range staleEntries(d) {
			if err := unix.Rmdir(p); err != nil && !errors.Is(err, unix.ENOENT) {
				log.Info("stale cgroup kept", "path", p, "err", err)
			}
		}
	}
	if scratchParent == "" {
		scratchParent = os.TempDir()
	}
	for _, p := range staleEntries(scratchParent) {
		st, err := os.Lstat(p)
		if err != nil || !st.IsDir() {
			continue
		}
		// Only our own: never remove another user's directory.
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
			continue
		}
		sc := &scratch{root: p}
		if err := sc.remove(); err != nil {
			log.Info("stale scratch kept", "path", p, "err", err)
		}
	}
}

// staleEntries lists dir/sharedos-run-PID-* whose PID is dead.
func staleEntries(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "sharedos-run-")
		if !ok {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}
