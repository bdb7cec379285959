package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"
)

// In-process tests of the Go API: the test binary is the stub (see TestMain).

func TestAPIListenerServedByCaller(t *testing.T) {
	needRoot(t)
	needTool(t, "curl")
	var out bytes.Buffer
	sb, err := Start(context.Background(), Spec{
		Command:   []string{"sh", "-c", `curl -sf -H "Authorization: Bearer $TOKEN" "$URL/hello"`},
		Listeners: []string{"bridge"},
		Stdout:    &out, Stderr: &out,
		ScratchParent: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	l := sb.Listener("bridge")
	if l == nil {
		t.Fatal("no bridge listener")
	}
	addr := l.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		t.Errorf("listener on %v, want 127.0.0.1", addr)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served %s %s", r.URL.Path, r.Header.Get("Authorization"))
	})}
	go srv.Serve(l)
	defer srv.Close()
	// The listener lives in the sandbox's network namespace: not on the host.
	if c, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		c.Close()
		t.Errorf("BREACH: the in-sandbox listener %v is reachable from the host namespace", addr)
	}
	url := "http://" + addr.String()
	if err := sb.Go("URL="+url, "TOKEN=tok"); err != nil {
		t.Fatal(err)
	}
	o := sb.Wait()
	if o.ExitCode != 0 || out.String() != "served /hello Bearer tok" {
		t.Errorf("exit %d, output %q, err %v", o.ExitCode, out.String(), o.Err)
	}
	for _, p := range sb.cgroupPaths() {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("cgroup %s not removed", p)
		}
	}
	if _, err := os.Stat(sb.Scratch()); err == nil {
		t.Errorf("scratch %s not removed", sb.Scratch())
	}
	t.Logf("teardown %v, cgroup %s", o.Teardown, o.CgroupMode)
}

// TestAPICgroupModes runs the same limits through each cgroup path this host can take
// (hybrid hosts can also take the pure-v1 one).
func TestAPICgroupModes(t *testing.T) {
	needRoot(t)
	modes := []CgroupMode{HostCgroupMode()}
	if modes[0] == CgroupHybrid {
		modes = append(modes, CgroupLegacy)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			var out bytes.Buffer
			sb, err := Start(context.Background(), Spec{
				Command:       []string{"sh", "-c", "cat /proc/self/cgroup"},
				Limits:        Limits{MemoryBytes: 256 << 20, Pids: 77, CPUs: 0.5},
				RequireCgroup: true,
				Stdout:        &out,
				ScratchParent: t.TempDir(),
				cgroupMode:    mode,
			})
			if err != nil {
				t.Fatal(err)
			}
			paths := sb.cgroupPaths()
			// The stub was forked from a launcher thread that entered the v1 groups
			// (enterV1): every thread of this process must be back out.
			tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
			for _, f := range tasks {
				b, _ := os.ReadFile(f)
				for _, p := range paths {
					if strings.Contains(string(b), filepath.Base(p)) {
						t.Errorf("launcher thread %s is still in the run's groups:\n%s", f, b)
					}
				}
			}
			for _, p := range paths {
				switch {
				case strings.Contains(p, "/memory/"):
					expectFile(t, filepath.Join(p, "memory.limit_in_bytes"), fmt.Sprint(256<<20))
				case strings.Contains(p, "/pids/"):
					expectFile(t, filepath.Join(p, "pids.max"), "77")
				case strings.Contains(p, "/cpu/"):
					expectFile(t, filepath.Join(p, "cpu.cfs_quota_us"), "50000")
				}
			}
			if err := sb.Go(); err != nil {
				t.Fatal(err)
			}
			o := sb.Wait()
			if o.ExitCode != 0 || o.CgroupMode != mode {
				t.Fatalf("exit %d mode %s err %v", o.ExitCode, o.CgroupMode, o.Err)
			}
			// The command ran inside the run's groups.
			for _, p := range paths {
				if !strings.Contains(p, "/unified/") && !strings.Contains(out.String(), filepath.Base(p)) {
					t.Errorf("command not in %s: %s", p, out.String())
				}
				if _, err := os.Stat(p); err == nil {
					t.Errorf("cgroup %s not removed", p)
				}
			}
			if o.Stats.PeakTasks < 1 || o.Stats.CPUTime <= 0 || o.Stats.PeakMemory <= 0 {
				t.Errorf("stats missing: %+v", o.Stats)
			}
		})
	}
}

func expectFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

func TestAPIAbortWithoutGo(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	sb, err := Start(context.Background(), Spec{Command: []string{"sh", "-c", "echo BREACH > /dev/stderr"}, ScratchParent: dir})
	if err != nil {
		t.Fatal(err)
	}
	o := sb.Wait()
	if o.ExitCode != -1 {
		t.Errorf("aborted run reports exit %d", o.ExitCode)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
}

func TestSpecValidation(t *testing.T) {
	// An empty command is allowed at Start (GoCommand brings it) and refused by Go.
	bad := []Spec{
		{Command: []string{"x"}, PassEnv: []string{"LD_PRELOAD"}},
		{Command: []string{"x"}, PassEnv: []string{"A=B"}},
		{Command: []string{"x"}, Env: []string{"NOEQUALS"}},
		{Command: []string{"x"}, Listeners: []string{"a", "a"}},
		{Command: []string{"x"}, AllowLoopback: []int{0}},
		{Command: []string{"x"}, AllowEgress: []string{"169.254.169.254:80"}},
		{Command: []string{"x"}, AllowEgress: []string{"example.com"}},
		{Command: []string{"x"}, AllowEgress: []string{"exa mple.com:443"}},
		{Command: []string{"x"}, AllowEgress: []string{"example.com:443\r\nX: y"}},
		{Command: []string{"x"}, AllowEgress: []string{"2130706433:80"}},
		{Command: []string{"x"}, Limits: Limits{MemoryBytes: -1}},
	}
	for _, s := range bad {
		if err := s.validate(); err == nil {
			t.Errorf("accepted %+v", s)
		}
	}
	good := Spec{Command: []string{"x"}, AllowEgress: []string{"api.anthropic.com:443", "127.0.0.1:8080", "[::1]:9"}, PassEnv: []string{"ANTHROPIC_API_KEY"}}
	if err := good.validate(); err != nil {
		t.Error(err)
	}
}

func TestEgressPolicy(t *testing.T) {
	p, err := newEgressPolicy([]string{"api.example.com:443", "127.0.0.1:8080", "localhost:80"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, target := range []string{"api.example.com:80", "API.EXAMPLE.COM:8443", "other.example.com:443", "127.0.0.1:8081",
		"localhost:80", "[::ffff:127.0.0.1]:8081", "api.example.com:443\r\n", "0x7f.1:80"} {
		if addr, err := p.resolve(ctx, target); err == nil {
			t.Errorf("%q allowed (dial %s)", target, addr)
		}
	}
	if addr, err := p.resolve(ctx, "127.0.0.1:8080"); err != nil || addr != "127.0.0.1:8080" {
		t.Errorf("explicit literal: %s %v", addr, err)
	}
	for ip, why := range map[string]string{"10.1.2.3": "private", "192.168.1.1": "private", "172.16.0.1": "private",
		"169.254.169.254": "metadata", "fe80::1": "link-local", "127.0.0.1": "loopback", "100.64.0.1": "private", "fd00::1": "private"} {
		if got := refusedAfterResolve(mustAddr(t, ip)); got != why {
			t.Errorf("%s: %q, want %q", ip, got, why)
		}
	}
	if got := refusedAfterResolve(mustAddr(t, "93.184.215.14")); got != "" {
		t.Errorf("public address refused: %s", got)
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestGoCommandAndVisible(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	// A directory below /tmp (hidden inside) made visible, read-only.
	visible := t.TempDir()
	os.WriteFile(filepath.Join(visible, "marker"), []byte("seen"), 0o644)
	var out bytes.Buffer
	sb, err := Start(context.Background(), Spec{Visible: []string{visible}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Home() == "" || !strings.HasPrefix(sb.Home(), sb.Scratch()) || !strings.HasPrefix(sb.WorkDir(), sb.Scratch()) {
		t.Fatalf("home %q work %q scratch %q", sb.Home(), sb.WorkDir(), sb.Scratch())
	}
	if err := sb.Go(); err == nil {
		t.Fatal("Go without a command accepted")
	}
	script := "cat " + filepath.Join(visible, "marker") + "; echo; (echo x > " + filepath.Join(visible, "marker") + ") 2>/dev/null && echo WROTE || echo READONLY; echo $EXTRA"
	if err := sb.GoCommand([]string{"sh", "-c", script}, "EXTRA=given"); err != nil {
		t.Fatal(err)
	}
	o := sb.Wait()
	if o.ExitCode != 0 || out.String() != "seen\nREADONLY\ngiven\n" {
		t.Fatalf("exit %d, output %q", o.ExitCode, out.String())
	}
}

// enterV1 moves only the calling thread into the run's v1 groups, and its way back
// returns the thread exactly where it was.
func TestEnterV1ThreadOnly(t *testing.T) {
	needRoot(t)
	mode := HostCgroupMode()
	if mode != CgroupHybrid && mode != CgroupLegacy {
		t.Skip("no v1 hierarchies on this host")
	}
	cs, err := newCgroupSet(mode, runName(), Limits{Pids: DefaultPids})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.killAndRemove(time.Second); err != nil {
			t.Error(err)
		}
	}()
	self, _ := os.ReadFile("/proc/self/cgroup")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, _ := os.ReadFile("/proc/thread-self/cgroup")
		leave, err := cs.enterV1()
		if err != nil {
			t.Error(err)
			return
		}
		inside, _ := os.ReadFile("/proc/thread-self/cgroup")
		leader, _ := os.ReadFile("/proc/self/cgroup")
		if err := leave(); err != nil {
			t.Error(err)
		}
		after, _ := os.ReadFile("/proc/thread-self/cgroup")
		for _, p := range cs.v1Path {
			if !strings.Contains(string(inside), filepath.Base(p)) {
				t.Errorf("thread not in %s:\n%s", p, inside)
			}
		}
		if unix.Gettid() != os.Getpid() && string(leader) != string(self) {
			t.Errorf("the process moved with the thread:\n%s", leader)
		}
		if string(after) != string(before) {
			t.Errorf("thread not back where it was:\n%s\nwant\n%s", after, before)
		}
	}()
	<-done
	if !cs.empty() {
		t.Error("groups not empty after the thread left")
	}
}

// readOwnCgroups reads /proc/self/cgroup and mountinfo once; its paths must be the
// library's (cgroup1.NestedPath), which reads mountinfo once per controller.
func TestOwnCgroupsMatchLibrary(t *testing.T) {
	own := readOwnCgroups()
	if own.err != nil {
		t.Skip("no /proc/self/cgroup:", own.err)
	}
	if u, err := ownCgroup2(); err != nil || u != own.unified {
		t.Errorf("unified %q, want %q (%v)", own.unified, u, err)
	}
	for _, suffix := range []string{"", "sharedos-run-1-2"} {
		lib, ours := cgroup1.NestedPath(suffix), own.v1Path(suffix)
		for _, n := range append(v1Controllers, cgroup1.Cpuset, cgroup1.Devices, cgroup1.Name("systemd"), cgroup1.Name("nonesuch")) {
			lp, lerr := lib(n)
			op, oerr := ours(n)
			if lp != op || (lerr == nil) != (oerr == nil) {
				t.Errorf("%s %q: %q (%v), want %q (%v)", n, suffix, op, oerr, lp, lerr)
			}
		}
	}
}
