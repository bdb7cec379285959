package files

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

func TestSnapshotFile(t *testing.T) {
	e := newEnv(t)
	e.write("doc.txt", "v1")
	var s1 snapshotCreateOutput
	e.ok("files.snapshot.create", obj{"path": p("doc.txt"), "label": "first"}, &s1)
	if !validSnapshotID(s1.SnapshotID) || s1.Files != 1 || s1.Bytes != 2 || s1.Label != "first" || !slices.Equal(s1.Path, []string{"doc.txt"}) {
		t.Fatalf("create %+v", s1)
	}
	var r replaceOutput
	e.ok("files.replace", obj{"path": p("doc.txt"), "content": "v2"}, &r)
	var s2 snapshotCreateOutput
	e.ok("files.snapshot.create", obj{"path": p("doc.txt")}, &s2)

	var l snapshotListOutput
	e.ok("files.snapshot.list", obj{"path": p("doc.txt")}, &l)
	if len(l.Snapshots) != 2 || l.Snapshots[0].SnapshotID != s2.SnapshotID || l.Snapshots[1].SnapshotID != s1.SnapshotID {
		t.Fatalf("list (newest first) %+v", l.Snapshots)
	}
	if l.Snapshots[1].Label != "first" || l.Snapshots[1].Files != 1 || l.Snapshots[1].Bytes != 2 {
		t.Errorf("summary %+v", l.Snapshots[1])
	}
	if _, err := time.Parse(time.RFC3339Nano, l.Snapshots[0].CreatedAt); err != nil {
		t.Error(err)
	}
	e.ok("files.snapshot.list", obj{"path": p("doc.txt"), "limit": 1}, &l)
	if len(l.Snapshots) != 1 || l.Snapshots[0].SnapshotID != s2.SnapshotID {
		t.Errorf("limit 1: %+v", l.Snapshots)
	}
	e.ok("files.snapshot.list", obj{"path": p()}, &l)
	if len(l.Snapshots) != 0 || l.Snapshots == nil {
		t.Errorf("other path: %+v", l.Snapshots)
	}

	res := e.fail("files.snapshot.restore", obj{"path": p("doc.txt"), "snapshotId": s1.SnapshotID, "expectedVersion": version([]byte("v1"))}, kernel.CodeToolExecutionFailed, "version conflict")
	if !res.Retryable || e.readWS("doc.txt") != "v2" {
		t.Fatal("a conflicting restore wrote or is not retryable")
	}
	var rr snapshotRestoreOutput
	e.ok("files.snapshot.restore", obj{"path": p("doc.txt"), "snapshotId": s1.SnapshotID, "expectedVersion": r.Version}, &rr)
	if e.readWS("doc.txt") != "v1" || rr.Restored != 1 || rr.Version != version([]byte("v1")) || rr.SnapshotID != s1.SnapshotID {
		t.Errorf("restore %+v, file %q", rr, e.readWS("doc.txt"))
	}
	// A deleted file comes back.
	e.ok("files.delete", obj{"path": p("doc.txt")}, nil)
	e.ok("files.snapshot.restore", obj{"path": p("doc.txt"), "snapshotId": s2.SnapshotID}, &rr)
	if e.readWS("doc.txt") != "v2" {
		t.Errorf("restore after delete: %q", e.readWS("doc.txt"))
	}
	e.fail("files.snapshot.restore", obj{"path": p("other.txt"), "snapshotId": s1.SnapshotID}, kernel.CodeToolExecutionFailed, "neither")
	e.fail("files.snapshot.restore", obj{"path": p("doc.txt", "x"), "snapshotId": s1.SnapshotID}, kernel.CodeToolExecutionFailed, "single file")
}

func TestSnapshotDirectory(t *testing.T) {
	e := newEnv(t)
	e.write("proj/a.txt", "A")
	e.write("proj/sub/b.txt", "B")
	e.write("proj/sub/bin", "\x00\x01")
	if err := os.MkdirAll(filepath.Join(e.ws, "proj", "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.outside, "sentinel"), filepath.Join(e.ws, "proj", "out-link")); err != nil {
		t.Fatal(err)
	}
	var s snapshotCreateOutput
	e.ok("files.snapshot.create", obj{"path": p("proj"), "label": "before"}, &s)
	if s.Files != 3 || s.Bytes != 4 {
		t.Fatalf("create %+v", s)
	}
	// The link was recorded, not followed.
	m, err := e.w.loadManifest(s.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Symlinks) != 1 || !slices.Equal(m.Symlinks[0].Path, []string{"out-link"}) || m.Kind != kindDirectory {
		t.Errorf("manifest %+v", m)
	}
	var files []string
	for _, f := range m.Files {
		files = append(files, strings.Join(f.Path, "/"))
	}
	if !slices.Equal(files, []string{"a.txt", "sub/b.txt", "sub/bin"}) {
		t.Errorf("manifest files %v", files)
	}

	e.ok("files.replace", obj{"path": p("proj", "a.txt"), "content": "A2"}, nil)
	e.ok("files.delete", obj{"path": p("proj", "sub"), "recursive": true}, nil)
	e.ok("files.delete", obj{"path": p("proj", "emptydir")}, nil)
	e.write("proj/new.txt", "kept")

	// One file out of a directory snapshot.
	var rr snapshotRestoreOutput
	e.ok("files.snapshot.restore", obj{"path": p("proj", "sub", "b.txt"), "snapshotId": s.SnapshotID}, &rr)
	if e.readWS("proj/sub/b.txt") != "B" || rr.Restored != 1 || rr.Version != version([]byte("B")) {
		t.Errorf("single file %+v", rr)
	}
	rr = snapshotRestoreOutput{}
	e.ok("files.snapshot.restore", obj{"path": p("proj"), "snapshotId": s.SnapshotID}, &rr)
	if rr.Restored != 3 || rr.Version != "" {
		t.Errorf("directory %+v", rr)
	}
	for rel, want := range map[string]string{"proj/a.txt": "A", "proj/sub/b.txt": "B", "proj/sub/bin": "\x00\x01", "proj/new.txt": "kept"} {
		if got := e.readWS(rel); got != want {
			t.Errorf("%s = %q; want %q", rel, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(e.ws, "proj", "emptydir")); err != nil || !fi.IsDir() {
		t.Error("the empty directory was not recreated")
	}
	e.fail("files.snapshot.restore", obj{"path": p("proj"), "snapshotId": s.SnapshotID, "expectedVersion": "x"}, kernel.CodeToolExecutionFailed, "expectedVersion applies to files")
	e.fail("files.snapshot.restore", obj{"path": p("proj", "nothing"), "snapshotId": s.SnapshotID}, kernel.CodeToolExecutionFailed, "holds nothing")
	e.fail("files.snapshot.restore", obj{"path": p("proj", "out-link"), "snapshotId": s.SnapshotID}, kernel.CodeToolExecutionFailed, "holds nothing")

	// A subdirectory out of a snapshot of the whole workspace.
	var whole snapshotCreateOutput
	e.ok("files.snapshot.create", obj{"path": p()}, &whole)
	e.ok("files.delete", obj{"path": p("proj", "sub"), "recursive": true}, nil)
	e.ok("files.snapshot.restore", obj{"path": p("proj", "sub"), "snapshotId": whole.SnapshotID}, &rr)
	if rr.Restored != 2 || e.readWS("proj/sub/b.txt") != "B" || e.exists("proj/a.txt") == false {
		t.Errorf("subtree restore %+v", rr)
	}
	var l snapshotListOutput
	e.ok("files.snapshot.list", obj{"path": p()}, &l)
	if len(l.Snapshots) != 1 || l.Snapshots[0].SnapshotID != whole.SnapshotID {
		t.Errorf("list of the root %+v", l.Snapshots)
	}
	e.checkOutside()
}

func TestSnapshotIDs(t *testing.T) {
	e := newEnv(t)
	e.write("f", "x")
	// A directory next to the snapshots that a traversing id would reach.
	if err := os.MkdirAll(filepath.Join(e.state, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"../x", "..", "x/../../y", "/etc", "snap-20260101T000000Z-0000000g", "snap-20260101T000000Z-../../a",
		"snap-20261399T000000Z-00000000", "snap-20260101T000000Z-0000000", "", "snap-20260101T000000Z-00000000/",
		"snap-20260101T000000Z-ABCDEF00",
	} {
		e.fail("files.snapshot.restore", obj{"path": p("f"), "snapshotId": id}, kernel.CodeToolExecutionFailed, "is not valid")
	}
	e.fail("files.snapshot.restore", obj{"path": p("f"), "snapshotId": "snap-20260101T000000Z-00000000"}, kernel.CodeToolExecutionFailed, "does not exist")
	for _, good := range []string{newSnapshotID(time.Now()), "snap-20261130T031500Z-0123abcd"} {
		if !validSnapshotID(good) {
			t.Errorf("%q refused", good)
		}
	}
}

func TestSnapshotSizeCap(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxSnapshotBytes = 10 })
	e.write("d/a", "12345")
	e.write("d/b", "123456")
	e.fail("files.snapshot.create", obj{"path": p("d")}, kernel.CodeToolExecutionFailed, "would exceed 10 bytes")
	ents, _ := os.ReadDir(filepath.Join(e.state, snapshotsDir))
	if len(ents) != 0 {
		t.Errorf("a refused snapshot left %d entries", len(ents))
	}
	e.ok("files.snapshot.create", obj{"path": p("d", "b")}, nil)
	e.fail("files.snapshot.create", obj{"path": p("missing")}, kernel.CodeToolExecutionFailed, "does not exist")
}
