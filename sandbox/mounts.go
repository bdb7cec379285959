package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountPlan is the file view the stub builds before the command runs.
type mountPlan struct {
	// Hide are directories covered by an empty tmpfs (/run, /tmp, /dev/shm, HOME…).
	Hide []string `json:"hide"`
	// Binds are paths that stay visible at their own place even below a hidden
	// directory: the scratch directory (writable), the working directory, --writable.
	Binds []bindSpec `json:"binds"`
}

type bindSpec struct {
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
}

// buildMountView: mounts private, every existing mount read-only, tmpfs over the hidden
// directories, a /proc of the new PID namespace, then the binds. It runs with the
// privileges of the stub (root or the owner of a new user namespace).
func buildMountView(p mountPlan) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Open the binds first: a hidden directory may be their parent (the scratch
	// directory usually lives in /tmp).
	fds := make([]int, len(p.Binds))
	for i, b := range p.Binds {
		fd, err := unix.Open(b.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", b.Path, err)
		}
		fds[i] = fd
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err := remountAllReadOnly(); err != nil {
		return err
	}
	for _, dir := range p.Hide {
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() {
			continue // absent, or a symlink (/var/run → /run) covered by its target
		}
		mode := "0755"
		if st.Mode()&os.ModeSticky != 0 {
			mode = "1777"
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+mode); err != nil {
			return fmt.Errorf("hide %s behind tmpfs: %w", dir, err)
		}
	}
	if err := mountProc(); err != nil {
		return err
	}
	for i, b := range p.Binds {
		if err := bindAt(fds[i], b); err != nil {
			return err
		}
	}
	return nil
}

func bindAt(fd int, b bindSpec) error {
	if err := os.MkdirAll(b.Path, 0o755); err != nil {
		return fmt.Errorf("mount point for %s: %w", b.Path, err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, b.Path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", b.Path, err)
	}
	// A bind copies the source mount's flags, read-only included: set them explicitly.
	if err := remount(b.Path, !b.Writable); err != nil {
		return fmt.Errorf("bind %s: %w", b.Path, err)
	}
	return nil
}

// mountProc mounts a /proc that shows only the new PID namespace and keeps the kernel
// knobs in it read-only (root without capabilities may still write some sysctls).
func mountProc() error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := remount(p, true); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	return nil
}

// remountAllReadOnly makes every mount in the view read-only.
func remountAllReadOnly() error {
	// One call for the whole tree (Linux ≥ 5.12): every mount, hidden ones included,
	// gets MNT_READONLY and keeps its other flags. It is all or nothing; on failure the
	// mounts are changed one by one below.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &attr); err == nil {
		return nil
	}
	points, err := mountPoints()
	if err != nil {
		return err
	}
	for _, mp := range points {
		if err := remount(mp, true); err != nil {
			// A mount point this uid cannot reach is as unreachable for the command,
			// which runs with the same uid and no capabilities.
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("read-only %s: %w", mp, err)
		}
	}
	return nil
}

// remount changes a mount's read-only flag, keeping the flags a user namespace may not
// clear (nosuid, nodev, noexec, atime).
func remount(path string, readOnly bool) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND)
	for _, f := range [][2]int64{
		{unix.ST_NOSUID, unix.MS_NOSUID},
		{unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f[0] != 0 {
			flags |= uintptr(f[1])
		}
	}
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	return unix.Mount("", path, "", flags, "")
}

// mountPoints lists the mount points of this mount namespace, parents first.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if !seen[mp] {
			seen[mp] = true
			out = append(out, filepath.Clean(mp))
		}
	}
	return out, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space…).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
