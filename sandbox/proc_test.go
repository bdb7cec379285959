package sandbox

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNothingSurvives(t *testing.T) {
	needTool(t, "setsid", "nohup")
	// Every classic way to outlive a parent: a new session, a double fork, nohup+disown,
	// a daemon (setsid -f forks and detaches).
	script := `
setsid sleep 300 &
( ( sleep 300 & ) & )
nohup sleep 300 >/dev/null 2>&1 &
setsid -f sh -c 'trap "" HUP TERM; exec sleep 300' </dev/null >/dev/null 2>&1
sleep 0.2
echo started`
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, command: script})
		expectCode(t, r, 0)
		if n := r.outcome.count(ViolationKilledCleanup); n < 4 {
			t.Errorf("want ≥4 killed-at-cleanup violations, got %d: %+v", n, r.outcome.Violations)
		}
	})
}

func TestLauncherKilledNothingSurvives(t *testing.T) {
	needRoot(t)
	asUsers(t, func(t *testing.T, uid int) {
		mark := marker()
		rn := startExec(t, execOpts{uid: uid, command: "setsid sleep 300 & (sleep 300 &) ; echo up; wait"}, mark)
		waitFor(t, "three marked processes", func() bool { return len(markedProcesses(mark)) >= 3 }, 10*time.Second)
		rn.cmd.Process.Signal(syscall.SIGKILL)
		rn.cmd.Wait()
		deadline := time.Now().Add(3 * time.Second)
		for len(markedProcesses(mark)) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if left := markedProcesses(mark); len(left) > 0 {
			t.Errorf("BREACH: survived the launcher's SIGKILL: %v", left)
		}
		// The dead launcher could not remove its cgroups or scratch: the next run does.
		next := runExec(t, execOpts{uid: uid, command: "true", flags: []string{"--scratch-dir", filepath.Dir(rn.outcome)}})
		expectCode(t, next, 0)
		if g := cgroupsOf(rn.cmd.Process.Pid); len(g) > 0 {
			t.Errorf("stale cgroups of the killed launcher not swept: %v", g)
		}
		if m, _ := filepath.Glob(filepath.Join(filepath.Dir(rn.outcome), "sharedos-run-*")); len(m) > 0 {
			t.Errorf("stale scratch of the killed launcher not swept: %v", m)
		}
	})
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		cmd  string
		argv []string
		want int
	}{
		{cmd: "exit 0", want: 0},
		{cmd: "exit 1", want: 1},
		{cmd: "exit 42", want: 42},
		{cmd: "exit 127", want: 127},
		{cmd: "kill -TERM $$", want: 143},
		{argv: []string{"sharedos-no-such-command"}, want: 127},
		{argv: []string{"/etc/hostname"}, want: 126},
	}
	asUsers(t, func(t *testing.T, uid int) {
		for _, c := range cases {
			r := runExec(t, execOpts{uid: uid, command: c.cmd, argv: c.argv})
			expectCode(t, r, c.want)
			if c.want == 143 && r.outcome.Signal != 15 {
				t.Errorf("signal %d, want 15", r.outcome.Signal)
			}
		}
	})
}

func TestSignals(t *testing.T) {
	needRoot(t)
	type step struct {
		name    string
		script  string
		flags   []string
		signals int
		want    int
	}
	steps := []step{
		// SIGINT reaches the command, which exits its own way.
		{"sigint-reaches", `trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done`, nil, 1, 7},
		// A command that ignores the signal: the second one kills the sandbox.
		{"second-kills", `trap 'echo got-int' INT; echo ready; while :; do sleep 0.05; done`, nil, 2, 137},
		// … and so does the end of --grace.
		{"grace-kills", `trap 'echo got-int' INT; echo ready; while :; do sleep 0.05; done`, []string{"--grace", "300ms"}, 1, 137},
	}
	asUsers(t, func(t *testing.T, uid int) {
		for _, s := range steps {
			rn := startExec(t, execOpts{uid: uid, command: s.script, flags: s.flags}, marker())
			waitFor(t, "ready", func() bool { return strings.Contains(rn.stdout.String(), "ready") }, 10*time.Second)
			for i := 0; i < s.signals; i++ {
				rn.cmd.Process.Signal(syscall.SIGINT)
				if i == 0 && s.signals > 1 {
					waitFor(t, "got-int", func() bool { return strings.Contains(rn.stdout.String(), "got-int") }, 10*time.Second)
				}
			}
			r := finishExec(t, rn, 15*time.Second)
			if r.code != s.want {
				t.Errorf("%s: exit %d, want %d; stdout %q stderr %q", s.name, r.code, s.want, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "got-int") {
				t.Errorf("%s: the command never saw SIGINT: %q", s.name, r.stdout)
			}
		}
	})
}

func TestTimeout(t *testing.T) {
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, flags: []string{"--timeout", "500ms", "--grace", "200ms"}, command: "trap '' TERM; sleep 30", timeout: 10 * time.Second})
		expectCode(t, r, 124)
		if !r.outcome.TimedOut || r.dur > 5*time.Second {
			t.Errorf("timed out %v after %v", r.outcome.TimedOut, r.dur)
		}
	})
}
