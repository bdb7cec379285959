package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests drive the real binary from outside, as root and (for the rootless ones) as
// nobody; the in-process API tests re-execute the test binary as the stub.

const nobody = 65534

var (
	sharedosBin string // the sharedos-run binary, world-readable
	testDir     string // 0755, holds the binary; removed at the end
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == StubArg {
		os.Exit(RunStub())
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Println("sandbox tests need root (they also run as an unprivileged uid from there)")
		return m.Run()
	}
	var err error
	testDir, err = os.MkdirTemp("", "sandbox-test-")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(testDir)
	os.Chmod(testDir, 0o755)
	sharedosBin = filepath.Join(testDir, "sharedos-run")
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	// Built as the Makefile builds it: urfave_cli_no_docs drops the CLI's man-page
	// generator, whose initialisers cost every start of the binary (launcher and stub).
	build := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", sharedosBin, "./cmd/sharedos-run")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Println("build sharedos-run:", err)
		return 1
	}
	return m.Run()
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 || sharedosBin == "" {
		t.Skip("needs root (CI runs as root)")
	}
}

func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed (apt-get install it; .ci/run does)", n)
		}
	}
}

// execOpts describes one `sharedos-run exec` run.
type execOpts struct {
	uid     int // 0: root
	flags   []string
	command string // run with sh -c
	argv    []string
	stdin   io.Reader
	env     []string // the launcher's environment (default: PATH, HOME)
	timeout time.Duration
}

type execResult struct {
	code           int
	stdout, stderr string
	outcome        outcomeFile
	pid            int
	dur            time.Duration
}

type outcomeFile struct {
	ExitCode   int         `json:"exitCode"`
	Signal     int         `json:"signal"`
	TimedOut   bool        `json:"timedOut"`
	Killed     bool        `json:"killed"`
	StartError string      `json:"startError"`
	Error      string      `json:"error"`
	CgroupMode CgroupMode  `json:"cgroupMode"`
	Stats      Stats       `json:"stats"`
	Violations []Violation `json:"violations"`
	Scratch    string      `json:"scratch"`
	TeardownMs float64     `json:"teardownMs"`
}

func (o outcomeFile) count(kind string) int {
	n := 0
	for _, v := range o.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

// runDir makes a directory the run's uid can use for scratch and the outcome file.
func runDir(t *testing.T, uid int) string {
	t.Helper()
	d, err := os.MkdirTemp(testDir, "run-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chown(d, uid, uid)
	return d
}

func marker() string { return fmt.Sprintf("sbmark%016x", rand.Uint64()) }

// syncBuf is a bytes.Buffer safe to read while the launcher writes it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a started launcher.
type running struct {
	cmd            *exec.Cmd
	outcome        string
	stdout, stderr *syncBuf
	mark           string
	t0             time.Time
}

// waitFor polls cond (bounded).
func waitFor(t *testing.T, what string, cond func() bool, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startExec starts the launcher; the caller waits with finishExec.
func startExec(t *testing.T, o execOpts, mark string) *running {
	t.Helper()
	dir := runDir(t, o.uid)
	outcome := filepath.Join(dir, "outcome.json")
	args := []string{"exec", "--scratch-dir", dir, "--outcome", outcome, "--env", "SANDBOX_TEST_MARK=" + mark}
	args = append(args, o.flags...)
	args = append(args, "--")
	if o.command != "" {
		args = append(args, "sh", "-c", o.command, mark)
	}
	args = append(args, o.argv...)
	cmd := exec.Command(sharedosBin, args...)
	// exec serves the bridge over the current directory as its workspace: give each
	// run a workspace of its own that its uid can use.
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	os.Chown(ws, o.uid, o.uid)
	cmd.Dir = ws
	cmd.Env = o.env
	if cmd.Env == nil {
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
		if o.uid != 0 {
			cmd.Env[1] = "HOME=" + dir
		}
	}
	cmd.WaitDelay = 2 * time.Second // a stdin the test holds open must not block Wait
	stdout, stderr := &syncBuf{}, &syncBuf{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.stdin, stdout, stderr
	if o.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(o.uid), Gid: uint32(o.uid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &running{cmd: cmd, outcome: outcome, stdout: stdout, stderr: stderr, mark: mark, t0: time.Now()}
}

func finishExec(t *testing.T, rn *running, limit time.Duration) execResult {
	t.Helper()
	cmd, outcome, stdout, stderr, mark, t0 := rn.cmd, rn.outcome, rn.stdout, rn.stderr, rn.mark, rn.t0
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("sharedos-run exec did not end within %v; stderr: %s", limit, stderr)
	}
	r := execResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), pid: cmd.Process.Pid, dur: time.Since(t0)}
	if b, err := os.ReadFile(outcome); err == nil {
		if err := json.Unmarshal(b, &r.outcome); err != nil {
			t.Fatalf("outcome: %v", err)
		}
	}
	checkNothingLeft(t, mark, r.pid, filepath.Dir(outcome), slices.Contains(cmd.Args, "--keep-scratch"))
	return r
}

// runExec runs the launcher to the end and checks that nothing of it is left.
func runExec(t *testing.T, o execOpts) execResult {
	t.Helper()
	needRoot(t)
	mark := marker()
	if o.timeout == 0 {
		o.timeout = 30 * time.Second
	}
	return finishExec(t, startExec(t, o, mark), o.timeout)
}

// checkNothingLeft: no process carries the marker, no cgroup or scratch directory of
// the launcher pid remains.
func checkNothingLeft(t *testing.T, mark string, pid int, dir string, kept bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	var left []string
	for {
		left = markedProcesses(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("BREACH: processes survived the run: %v", left)
		for _, p := range left {
			var n int
			fmt.Sscan(p, &n)
			syscall.Kill(n, syscall.SIGKILL)
		}
	}
	if groups := cgroupsOf(pid); len(groups) > 0 {
		t.Errorf("cgroups left behind: %v", groups)
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, "sharedos-run-*")); len(ents) > 0 && !kept {
		t.Errorf("scratch left behind: %v", ents)
	}
}

func markedProcesses(mark string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if bytes.Contains(b, []byte(mark)) {
				comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
				out = append(out, e.Name()+" "+strings.TrimSpace(string(comm)))
				break
			}
		}
	}
	return out
}

// cgroupsOf lists cgroup directories named for the launcher pid, anywhere they could be.
func cgroupsOf(pid int) []string {
	pat := fmt.Sprintf("sharedos-run-%d-*", pid)
	var out []string
	for _, base := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*", "/sys/fs/cgroup/*/*", "/sys/fs/cgroup/*/*/*"} {
		m, _ := filepath.Glob(filepath.Join(base, pat))
		out = append(out, m...)
	}
	return out
}

func expectCode(t *testing.T, r execResult, want int) {
	t.Helper()
	if r.code != want {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, want, r.stdout, r.stderr)
	}
}

// asUsers runs f as root and as nobody (rootless: user namespace, no cgroup).
func asUsers(t *testing.T, f func(t *testing.T, uid int)) {
	for _, uid := range []int{0, nobody} {
		t.Run(fmt.Sprintf("uid%d", uid), func(t *testing.T) { f(t, uid) })
	}
}
