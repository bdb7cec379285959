package sandbox

import (
	"testing"
	"time"
)

func TestForkBombStoppedByPidsLimit(t *testing.T) {
	needTool(t, "bash")
	r := runExec(t, execOpts{flags: []string{"--pids", "64", "--timeout", "2s", "--grace", "100ms"},
		argv: []string{"bash", "-c", `b() { b | b & }; b; sleep 10`}, timeout: 20 * time.Second})
	if r.outcome.Stats.PeakTasks > 64 || r.outcome.Stats.PeakTasks < 32 {
		t.Errorf("peak tasks %d, want ≤64 (and the bomb to reach the limit)", r.outcome.Stats.PeakTasks)
	}
	if r.outcome.count(ViolationPidsLimit) != 1 || r.outcome.Stats.PidsLimitHits == 0 {
		t.Errorf("pids-limit not reported: %+v", r.outcome)
	}
}

func TestMemoryHogOOMKilled(t *testing.T) {
	needTool(t, "perl")
	r := runExec(t, execOpts{flags: []string{"--memory", "64M"}, argv: []string{"perl", "-e", `$x = "x" x (512*1024*1024); print "BREACH\n"`}})
	expectCode(t, r, 137)
	if r.outcome.Stats.OOMKills < 1 || r.outcome.count(ViolationOOMKill) != 1 {
		t.Errorf("OOM kill not reported: %+v", r.outcome)
	}
	if r.outcome.Stats.PeakMemory > 64<<20+1<<20 {
		t.Errorf("peak memory %d above the limit", r.outcome.Stats.PeakMemory)
	}
}

func TestCPULimitObservable(t *testing.T) {
	// One second of busy loop: with 0.2 CPU it may use at most about 0.2 s of CPU
	// time, however loaded the machine is (the quota is a ceiling, not a share). The
	// unlimited run is logged for comparison only: on a busy machine it gets less
	// than a full core, so it proves nothing either way.
	busy := "timeout 1 sh -c 'while :; do :; done'; true"
	limited := runExec(t, execOpts{flags: []string{"--cpus", "0.2"}, command: busy})
	free := runExec(t, execOpts{command: busy})
	expectCode(t, limited, 0)
	l, f := limited.outcome.Stats.CPUTime, free.outcome.Stats.CPUTime
	t.Logf("cpu time: limited %v, unlimited %v", l, f)
	if l < 20*time.Millisecond || l > 350*time.Millisecond {
		t.Errorf("CPU limit not observable: limited run used %v of CPU in 1s at --cpus 0.2", l)
	}
}

func TestRootlessWithoutCgroupWarns(t *testing.T) {
	r := runExec(t, execOpts{uid: nobody, command: "true"})
	expectCode(t, r, 0)
	if r.outcome.CgroupMode != CgroupNone || !contains(r.stderr, "warning: running without a cgroup") || !contains(r.stderr, "permission denied") {
		t.Errorf("want one warning naming the reason; mode %s, stderr %q", r.outcome.CgroupMode, r.stderr)
	}
	if n := count(r.stderr, "without a cgroup"); n != 1 {
		t.Errorf("warning printed %d times", n)
	}
	for _, flags := range [][]string{{"--require-cgroup"}, {"--memory", "100M"}, {"--pids", "10"}} {
		r := runExec(t, execOpts{uid: nobody, flags: flags, command: "echo BREACH"})
		expectCode(t, r, 125)
		if contains(r.stdout, "BREACH") {
			t.Errorf("%v: ran without the cgroup it asked for", flags)
		}
	}
}
