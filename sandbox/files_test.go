package sandbox

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }
func count(s, sub string) int     { return strings.Count(s, sub) }

func TestFilesAndSecrets(t *testing.T) {
	needRoot(t)
	// Stand-ins for the docker socket and the user's D-Bus, in their real places.
	mark := marker()
	docker := "/run/" + mark + "-docker.sock"
	bus := "/run/user/4242/" + mark + "-bus"
	os.MkdirAll(filepath.Dir(bus), 0o755)
	for _, p := range []string{docker, bus} {
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	}
	defer os.Remove("/run/user/4242")
	asUsers(t, func(t *testing.T, uid int) {
		dir := runDir(t, uid)
		home := filepath.Join(dir, "callerhome")
		os.Mkdir(home, 0o755)
		os.WriteFile(filepath.Join(home, "secret"), []byte("s"), 0o644)
		agent := filepath.Join(dir, "agent.sock")
		l, err := net.Listen("unix", agent)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Chown(home, uid, uid)
		os.Chown(agent, uid, uid)
		writable := filepath.Join(dir, "writable")
		os.Mkdir(writable, 0o755)
		os.Chown(writable, uid, uid)
		workspace := "/var/tmp"
		script := fmt.Sprintf(`
for p in /etc/sbx /usr/sbx /var/tmp/sbx /sbx %[1]s/sbx %[2]s/sbx /proc/sys/kernel/hostname; do
  if (echo x > $p) 2>/dev/null; then echo "BREACH write $p"; fi
done
for p in %[2]s/secret %[3]s %[4]s %[5]s /run/docker.sock /var/run/docker.sock; do
  if [ -e $p ]; then echo "BREACH visible $p"; fi
done
[ -z "$(ls -A /root 2>/dev/null)" ] || echo "BREACH /root visible"
[ -z "$(ls -A /run)" ] || echo "BREACH /run not empty: $(ls -A /run)"
# /tmp holds only the way down to the scratch directory
[ "$(ls -A /tmp | wc -l)" = 1 ] || echo "BREACH /tmp not empty: $(ls -A /tmp)"
[ -z "${SSH_AUTH_SOCK:-}${DBUS_SESSION_BUS_ADDRESS:-}${LD_PRELOAD:-}${SECRET_TOKEN:-}" ] || echo "BREACH env"
[ "${PASSED:-}" = yes ] && echo passed-ok
echo x > "$HOME/f" && echo x > "$TMPDIR/f" && echo x > ./f && echo scratch-ok
echo x > %[6]s/f && echo writable-ok
echo done
`, workspace, home, agent, docker, bus, writable)
		env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "SSH_AUTH_SOCK=" + agent,
			"DBUS_SESSION_BUS_ADDRESS=unix:path=" + bus, "LD_PRELOAD=/nonexistent.so", "SECRET_TOKEN=t", "PASSED=yes"}
		r := runExec(t, execOpts{uid: uid, env: env, flags: []string{"--pass-env", "PASSED", "--writable", writable}, command: script})
		expectCode(t, r, 0)
		if contains(r.stdout, "BREACH") {
			t.Errorf("%s", r.stdout)
		}
		for _, want := range []string{"passed-ok", "scratch-ok", "writable-ok", "done"} {
			if !contains(r.stdout, want) {
				t.Errorf("missing %s: %s %s", want, r.stdout, r.stderr)
			}
		}
		if b, err := os.ReadFile(filepath.Join(writable, "f")); err != nil || string(b) != "x\n" {
			t.Errorf("--writable did not write through: %v", err)
		}
		if r.outcome.count(ViolationWritable) != 1 {
			t.Errorf("--writable not recorded: %+v", r.outcome.Violations)
		}
		for _, bad := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH"} {
			r := runExec(t, execOpts{uid: uid, flags: []string{"--pass-env", bad}, command: "echo BREACH"})
			if r.code == 0 || contains(r.stdout, "BREACH") {
				t.Errorf("--pass-env %s accepted", bad)
			}
		}
	})
}

func TestKeepScratch(t *testing.T) {
	needRoot(t)
	r := runExec(t, execOpts{flags: []string{"--keep-scratch"}, command: "echo kept > $HOME/f"})
	expectCode(t, r, 0)
	b, err := os.ReadFile(filepath.Join(r.outcome.Scratch, "home", "f"))
	if err != nil || string(b) != "kept\n" {
		t.Errorf("scratch not kept: %v", err)
	}
	os.RemoveAll(r.outcome.Scratch)
}

func TestPrivileges(t *testing.T) {
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, command: `id -u; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status`})
		expectCode(t, r, 0)
		lines := strings.Fields(r.stdout)
		if len(lines) == 0 || lines[0] != fmt.Sprint(uid) {
			t.Errorf("uid changed: %q", r.stdout)
		}
		for _, k := range []string{"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"} {
			if !contains(r.stdout, k+"\t0000000000000000") {
				t.Errorf("%s not empty: %s", k, r.stdout)
			}
		}
		if !contains(r.stdout, "NoNewPrivs:\t1") {
			t.Errorf("no_new_privs not set: %s", r.stdout)
		}
	})
}
