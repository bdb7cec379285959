package files

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-run/kernel"
)

func TestCreate(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name    string
		content any
		want    string
	}{
		{"string as is", "plain <text> & \"quotes\"\n", "plain <text> & \"quotes\"\n"},
		{"object as JSON", obj{"b": 1, "a": []any{true, nil, 1.5}, "h": "<&>"}, `{"a":[true,null,1.5],"b":1,"h":"<&>"}`},
		{"number as JSON", 42, "42"},
		{"null as JSON", nil, "null"},
		{"empty string", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			path := p("new", strings.ReplaceAll(tc.name, " ", "-"))
			var out createOutput
			e.ok("files.create", obj{"path": path, "content": tc.content}, &out)
			got := e.readWS(strings.Join(path, "/"))
			if got != tc.want {
				t.Errorf("wrote %q; want %q", got, tc.want)
			}
			if !out.Created || out.Version != version([]byte(tc.want)) || out.Size != int64(len(tc.want)) {
				t.Errorf("output %+v", out)
			}
		})
	}
	e.fail("files.create", obj{"path": p("new", "string-as-is"), "content": "again"}, kernel.CodeToolExecutionFailed, "already exists")
	if got := e.readWS("new/string-as-is"); got != "plain <text> & \"quotes\"\n" {
		t.Errorf("create over an existing file changed it to %q", got)
	}
	e.fail("files.create", obj{"path": p("new"), "content": "x"}, kernel.CodeToolExecutionFailed, "already exists")
	e.fail("files.create", obj{"path": p(), "content": "x"}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.create", obj{"path": p("x")}, kernel.CodeInvalidToolArguments, "content")
	e.fail("files.create", obj{"path": p("x"), "content": "x", "metadata": "no"}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.create", obj{"path": p("x"), "content": "x", "extra": 1}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.create", obj{"path": p("new", "string-as-is", "below"), "content": "x"}, kernel.CodeToolExecutionFailed, "not a directory")
}

// Only one of many concurrent creates of the same path wins; the others are told
// the file exists, and the content is the winner's, whole.
func TestCreateExclusiveUnderRace(t *testing.T) {
	e := newEnv(t)
	const n = 16
	var wg sync.WaitGroup
	results := make([]kernel.Result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = e.call("files.create", obj{"path": p("race", "f"), "content": strings.Repeat(fmt.Sprint(i%10), 1000)})
		})
	}
	wg.Wait()
	wins := 0
	for _, r := range results {
		switch {
		case r.Status == kernel.Succeeded:
			wins++
		case !strings.Contains(r.Message, "already exists"):
			t.Errorf("loser: %s", r.Message)
		}
	}
	if wins != 1 {
		t.Fatalf("%d creates succeeded; want 1", wins)
	}
	got := e.readWS("race/f")
	if len(got) != 1000 || strings.Count(got, got[:1]) != 1000 {
		t.Errorf("content is a mix: %q", got[:20])
	}
}

func TestReplace(t *testing.T) {
	e := newEnv(t)
	var c createOutput
	e.ok("files.create", obj{"path": p("a.txt"), "content": "one"}, &c)
	var r replaceOutput
	e.ok("files.replace", obj{"path": p("a.txt"), "content": "two", "expectedVersion": c.Version}, &r)
	if r.PreviousVersion != c.Version || r.Version != version([]byte("two")) || r.Size != 3 || e.readWS("a.txt") != "two" {
		t.Fatalf("replace %+v, file %q", r, e.readWS("a.txt"))
	}
	res := e.fail("files.replace", obj{"path": p("a.txt"), "content": "three", "expectedVersion": c.Version}, kernel.CodeToolExecutionFailed, "version conflict: expected "+c.Version+", current "+r.Version)
	if !res.Retryable {
		t.Error("a version conflict must be retryable")
	}
	if e.readWS("a.txt") != "two" {
		t.Error("a conflicting replace wrote")
	}
	e.ok("files.replace", obj{"path": p("a.txt"), "content": obj{"k": "v"}}, &r)
	if e.readWS("a.txt") != `{"k":"v"}` {
		t.Errorf("replace without expectedVersion wrote %q", e.readWS("a.txt"))
	}
	e.write("dir/x", "x")
	res = e.fail("files.replace", obj{"path": p("missing"), "content": "x"}, kernel.CodeToolExecutionFailed, "does not exist")
	if res.Retryable {
		t.Error("not-found must not be retryable")
	}
	e.fail("files.replace", obj{"path": p("dir"), "content": "x"}, kernel.CodeToolExecutionFailed, "is a directory")
	e.fail("files.replace", obj{"path": p("dir"), "content": "x", "expectedVersion": "abc"}, kernel.CodeToolExecutionFailed, "is a directory")
	if e.exists("missing") {
		t.Error("replace created a missing file")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(e.ws)
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			t.Errorf("left behind %s", d.Name())
		}
	}
}

// Replacing through an in-workspace symlink updates the target and keeps the link.
func TestReplaceThroughInsideSymlink(t *testing.T) {
	e := newEnv(t)
	e.write("real/target.txt", "old")
	if err := os.Symlink("real/target.txt", filepath.Join(e.ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", filepath.Join(e.ws, "dirlink")); err != nil {
		t.Fatal(err)
	}
	e.ok("files.replace", obj{"path": p("link"), "content": "new"}, nil)
	if fi, err := os.Lstat(filepath.Join(e.ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced by a file")
	}
	if e.readWS("real/target.txt") != "new" {
		t.Errorf("target is %q", e.readWS("real/target.txt"))
	}
	e.ok("files.replace", obj{"path": p("dirlink", "target.txt"), "content": "newer"}, nil)
	if e.readWS("real/target.txt") != "newer" {
		t.Errorf("target is %q", e.readWS("real/target.txt"))
	}
	var r readOutput
	e.ok("files.read", obj{"path": p("dirlink", "target.txt")}, &r)
	if r.Content != "newer" {
		t.Errorf("read through a dir link: %q", r.Content)
	}
}

func TestAppend(t *testing.T) {
	e := newEnv(t)
	var c createOutput
	e.ok("files.create", obj{"path": p("log"), "content": "a\n"}, &c)
	var a appendOutput
	e.ok("files.append", obj{"path": p("log"), "content": "b\n", "expectedVersion": c.Version}, &a)
	if e.readWS("log") != "a\nb\n" || a.Version != version([]byte("a\nb\n")) || a.Size != 4 {
		t.Fatalf("append %+v, file %q", a, e.readWS("log"))
	}
	res := e.fail("files.append", obj{"path": p("log"), "content": "c\n", "expectedVersion": c.Version}, kernel.CodeToolExecutionFailed, "version conflict")
	if !res.Retryable {
		t.Error("a version conflict must be retryable")
	}
	e.ok("files.append", obj{"path": p("log"), "content": []any{1, 2}}, &a)
	if e.readWS("log") != "a\nb\n[1,2]" {
		t.Errorf("file %q", e.readWS("log"))
	}
	e.fail("files.append", obj{"path": p("nope"), "content": "x"}, kernel.CodeToolExecutionFailed, "only appends to an existing file")
	if e.exists("nope") {
		t.Error("append created a file")
	}
	e.write("d/x", "")
	e.fail("files.append", obj{"path": p("d"), "content": "x"}, kernel.CodeToolExecutionFailed, "is a directory")
}

// Concurrent appends through the tools all land, whole.
func TestConcurrentAppends(t *testing.T) {
	e := newEnv(t)
	e.ok("files.create", obj{"path": p("log"), "content": ""}, nil)
	var wg sync.WaitGroup
	results := make([]kernel.Result, 20)
	for i := range results {
		wg.Go(func() {
			results[i] = e.call("files.append", obj{"path": p("log"), "content": fmt.Sprintf("line %02d\n", i)})
		})
	}
	wg.Wait()
	for _, r := range results {
		if r.Status != kernel.Succeeded {
			t.Fatalf("append: %s", r.Message)
		}
	}
	lines := strings.Split(strings.TrimSuffix(e.readWS("log"), "\n"), "\n")
	if len(lines) != 20 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	var c createOutput
	e.ok("files.create", obj{"path": p("a.txt"), "content": "a"}, &c)
	e.write("tree/sub/x", "x")
	e.write("tree/y", "y")
	if err := os.Mkdir(filepath.Join(e.ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.txt", filepath.Join(e.ws, "link")); err != nil {
		t.Fatal(err)
	}

	res := e.fail("files.delete", obj{"path": p("a.txt"), "expectedVersion": version([]byte("other"))}, kernel.CodeToolExecutionFailed, "version conflict")
	if !res.Retryable || !e.exists("a.txt") {
		t.Errorf("retryable %v, exists %v", res.Retryable, e.exists("a.txt"))
	}
	e.fail("files.delete", obj{"path": p("tree")}, kernel.CodeToolExecutionFailed, "pass recursive:true")
	e.fail("files.delete", obj{"path": p("tree"), "recursive": true, "expectedVersion": "x"}, kernel.CodeToolExecutionFailed, "expectedVersion applies to files")
	e.fail("files.delete", obj{"path": p("missing")}, kernel.CodeToolExecutionFailed, "does not exist")
	e.fail("files.delete", obj{"path": p()}, kernel.CodeInvalidToolArguments, "")
	if !e.exists("tree/sub/x") {
		t.Fatal("a refused delete removed files")
	}

	var d deleteOutput
	e.ok("files.delete", obj{"path": p("link")}, &d)
	if d.Kind != kindSymlink || !d.Deleted || e.exists("link") || !e.exists("a.txt") {
		t.Errorf("deleting a link: %+v, target exists %v", d, e.exists("a.txt"))
	}
	e.ok("files.delete", obj{"path": p("a.txt"), "expectedVersion": c.Version}, &d)
	if d.Kind != kindFile || e.exists("a.txt") {
		t.Errorf("delete file: %+v", d)
	}
	e.ok("files.delete", obj{"path": p("empty")}, &d)
	if d.Kind != kindDirectory || e.exists("empty") {
		t.Errorf("delete empty dir: %+v", d)
	}
	e.ok("files.delete", obj{"path": p("tree"), "recursive": true}, &d)
	if d.Kind != kindDirectory || e.exists("tree") {
		t.Errorf("delete tree: %+v", d)
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	e := newEnv(t)
	md := obj{"title": "Plan", "n": 3.0, "nested": obj{"ok": true}}
	e.ok("files.create", obj{"path": p("doc.md"), "content": "x", "metadata": md}, nil)
	var st statOutput
	e.ok("files.stat", obj{"path": p("doc.md")}, &st)
	if fmt.Sprint(st.Metadata) != fmt.Sprint(md) {
		t.Fatalf("metadata %v; want %v", st.Metadata, md)
	}
	// Metadata lives in the state directory, never in the workspace.
	ents, _ := os.ReadDir(e.ws)
	if len(ents) != 1 {
		t.Errorf("workspace holds %d entries", len(ents))
	}
	e.ok("files.append", obj{"path": p("doc.md"), "content": "y", "metadata": obj{"title": "Plan v2"}}, nil)
	st = statOutput{}
	e.ok("files.stat", obj{"path": p("doc.md")}, &st)
	if fmt.Sprint(st.Metadata) != "map[title:Plan v2]" {
		t.Errorf("after append: %v", st.Metadata)
	}
	e.ok("files.replace", obj{"path": p("doc.md"), "content": "z"}, nil)
	st = statOutput{}
	e.ok("files.stat", obj{"path": p("doc.md")}, &st)
	if st.Metadata["title"] != "Plan v2" {
		t.Errorf("replace lost metadata: %v", st.Metadata)
	}
	e.ok("files.delete", obj{"path": p("doc.md")}, nil)
	e.ok("files.create", obj{"path": p("doc.md"), "content": "again"}, nil)
	st = statOutput{}
	e.ok("files.stat", obj{"path": p("doc.md")}, &st)
	if st.Metadata != nil {
		t.Errorf("metadata survived delete: %v", st.Metadata)
	}

	e.ok("files.create", obj{"path": p("t", "a"), "content": "", "metadata": obj{"k": 1}}, nil)
	e.ok("files.create", obj{"path": p("t", "s", "b"), "content": "", "metadata": obj{"k": 2}}, nil)
	e.ok("files.create", obj{"path": p("tt"), "content": "", "metadata": obj{"k": 3}}, nil)
	e.ok("files.delete", obj{"path": p("t"), "recursive": true}, nil)
	st = statOutput{}
	recs, _ := os.ReadDir(filepath.Join(e.state, metadataDir))
	if len(recs) != 1 {
		t.Errorf("%d metadata records after a recursive delete; want 1 (tt's)", len(recs))
	}
	e.ok("files.stat", obj{"path": p("tt")}, &st)
	if st.Metadata["k"] != 3.0 {
		t.Errorf("a sibling's metadata was dropped: %v", st.Metadata)
	}
}
