package sandbox

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func doctorJSON(t *testing.T, cmd *exec.Cmd) (Report, int) {
	t.Helper()
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("doctor --json: %v: %s", err, out)
	}
	return r, code
}

func TestDoctorReportsHost(t *testing.T) {
	needRoot(t)
	r, code := doctorJSON(t, exec.Command(sharedosBin, "doctor", "--json", "--require-cgroup"))
	if code != 0 || !r.OK {
		t.Fatalf("doctor not ok (exit %d): %+v", code, r)
	}
	if r.CgroupMode != HostCgroupMode() || !r.Cgroup.OK {
		t.Errorf("cgroups: %+v", r)
	}
	for _, ns := range []string{"user", "net", "pid", "mount"} {
		if !r.Namespaces[ns].OK {
			t.Errorf("%s namespace: %+v", ns, r.Namespaces[ns])
		}
	}
	if !r.Sandbox.OK || !r.PTY.OK {
		t.Errorf("probe %+v pty %+v", r.Sandbox, r.PTY)
	}
	t.Logf("host cgroup mode: %s, writable %v", r.CgroupMode, r.Writable)
}

// readOnlyCgroupfs runs the binary in a private mount namespace whose cgroup mounts are
// read-only: the state of a container without cgroup delegation.
func readOnlyCgroupfs(args ...string) *exec.Cmd {
	script := `set -e
mount --make-rprivate /
for m in $(awk '$9 ~ /^cgroup/ {print $5}' /proc/self/mountinfo); do mount -o remount,bind,ro "$m"; done
exec "$@"`
	return exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh", sharedosBin}, args...)...)
}

func TestDoctorReadOnlyCgroupfs(t *testing.T) {
	needRoot(t)
	needTool(t, "unshare", "awk")
	r, code := doctorJSON(t, readOnlyCgroupfs("doctor", "--json", "--require-cgroup"))
	if code == 0 || r.OK || r.Cgroup.OK {
		t.Fatalf("doctor --require-cgroup passed on a read-only cgroupfs (exit %d): %+v", code, r)
	}
	for k, w := range r.Writable {
		if w {
			t.Errorf("%s reported writable", k)
		}
	}
	if !strings.Contains(r.Cgroup.Error, "read-only") {
		t.Errorf("reason not named: %q", r.Cgroup.Error)
	}
	// Without --require-cgroup the host is still usable.
	_, code = doctorJSON(t, readOnlyCgroupfs("doctor", "--json"))
	if code != 0 {
		t.Errorf("doctor without --require-cgroup failed: %d", code)
	}
	// exec: a warning without the flag, an error with it.
	out, err := readOnlyCgroupfs("exec", "--", "echo", "ran").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ran") || !strings.Contains(string(out), "warning: running without a cgroup") {
		t.Errorf("exec without cgroup: %v: %s", err, out)
	}
	out, err = readOnlyCgroupfs("exec", "--require-cgroup", "--", "echo", "BREACH").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || strings.Contains(string(out), "BREACH") {
		t.Errorf("exec --require-cgroup on read-only cgroupfs: %v: %s", err, out)
	}
}

// TestUserNamespacesForbidden: an unprivileged caller where user namespaces are
// forbidden gets a clear error, never an unconfined run.
func TestUserNamespacesForbidden(t *testing.T) {
	needRoot(t)
	needTool(t, "setpriv")
	// A user namespace of our own (full identity map) with its limit of nested user
	// namespaces set to 0; inside it, run the launcher as nobody.
	script := `echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"`
	cmd := exec.Command("sh", "-c", script, "sh", sharedosBin, "exec", "--", "echo", "BREACH")
	// exec serves the bridge over the working directory, with its state under HOME:
	// both must be usable by nobody, so that the refusal is the user namespace's.
	dir := runDir(t, nobody)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
		GidMappingsEnableSetgroups: true,
	}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("hung")
	}
	s := string(out)
	if strings.Contains(s, "BREACH") {
		t.Fatalf("BREACH: ran without a user namespace: %s", s)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 125 || !strings.Contains(s, "user namespaces are forbidden") {
		t.Errorf("want exit 125 naming the cause: %v: %s", err, s)
	}
	_ = os.Getpid
}
