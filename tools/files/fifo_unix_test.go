//go:build unix

package files

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

// A FIFO planted in the workspace must not hang a call waiting for a writer.
func TestFIFONeverBlocks(t *testing.T) {
	e := newEnv(t)
	if err := syscall.Mkfifo(filepath.Join(e.ws, "pipe"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	e.write("f.txt", "text")
	calls := []struct {
		tool string
		args obj
	}{
		{"files.list", obj{"path": p()}},
		{"files.stat", obj{"path": p("pipe")}},
		{"files.read", obj{"path": p("pipe")}},
		{"files.append", obj{"path": p("pipe"), "content": "x"}},
		{"files.grep", obj{"path": p(), "pattern": "text"}},
		{"files.snapshot.create", obj{"path": p()}},
	}
	results := make([]kernel.Result, len(calls))
	done := make(chan struct{})
	// Only calls run in the goroutine; the test goroutine does all the failing.
	go func() {
		defer close(done)
		for i, c := range calls {
			results[i] = e.call(c.tool, c.args)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a call on a FIFO blocked")
	}
	var l listOutput
	decodeOutput(t, results[0].Output, &l)
	if len(l.Entries) != 2 || l.Entries[1].Name != "pipe" || l.Entries[1].Kind != kindOther {
		t.Errorf("list %+v", l.Entries)
	}
	var st statOutput
	decodeOutput(t, results[1].Output, &st)
	if st.Kind != kindOther || st.Version != "" {
		t.Errorf("stat %+v", st)
	}
	for _, r := range results[2:4] {
		if r.Status != kernel.Failed || r.Message != `"/pipe" is not a regular file` {
			t.Errorf("read/append: %s %q", r.Status, r.Message)
		}
	}
	var g grepOutput
	decodeOutput(t, results[4].Output, &g)
	if len(g.Matches) != 1 || g.SkippedCount != 1 || g.Skipped[0].Reason != skipNotRegular {
		t.Errorf("grep %+v", g)
	}
	var s snapshotCreateOutput
	decodeOutput(t, results[5].Output, &s)
	if s.Files != 1 {
		t.Errorf("snapshot %+v", s)
	}
}
