package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

func TestTTY(t *testing.T) {
	needRoot(t)
	script := `test -t 0 && test -t 1 && echo tty-ok; stty size; echo "term=$TERM"; sleep 300 & echo bg-started`
	t.Run("caller-on-a-terminal", func(t *testing.T) {
		// The launcher's own stdio is a terminal of 33x101: the command's pty inherits it.
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pty here: %v", err)
		}
		defer ptmx.Close()
		pty.Setsize(ptmx, &pty.Winsize{Rows: 33, Cols: 101})
		mark := marker()
		dir := runDir(t, 0)
		cmd := exec.Command(sharedosBin, "exec", "--tty", "--scratch-dir", dir, "--env", "SANDBOX_TEST_MARK="+mark, "--", "sh", "-c", script)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/root", "TERM=xterm"}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		var buf bytes.Buffer
		var mu sync.Mutex
		go func() {
			b := make([]byte, 4096)
			for {
				n, err := ptmx.Read(b)
				mu.Lock()
				buf.Write(b[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		waitDone(t, cmd, 10*time.Second)
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		for _, want := range []string{"tty-ok", "33 101", "term=xterm", "bg-started"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in %q", want, out)
			}
		}
		checkNothingLeft(t, mark, cmd.Process.Pid, dir, false)
	})
	t.Run("stdin-held-open", func(t *testing.T) {
		// Nobody closes stdin and a child keeps the pty open: the launcher must still
		// end promptly (the relay's blocked reads are interrupted, not waited for).
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		defer pr.Close()
		r := runExec(t, execOpts{flags: []string{"--tty"}, command: script, stdin: pr, timeout: 10 * time.Second})
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "tty-ok") || r.dur > 5*time.Second {
			t.Errorf("after %v: %q", r.dur, r.stdout)
		}
	})
}

func waitDone(t *testing.T, cmd *exec.Cmd, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("launcher: %v", err)
		}
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("launcher did not end within %v", limit)
	}
}
