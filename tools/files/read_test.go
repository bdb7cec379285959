package files

import (
	"encoding/base64"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

func TestListSortedWhateverTheCreationOrder(t *testing.T) {
	e := newEnv(t)
	names := []string{"b.txt", "a.txt", "Z.md", "c", "a-b", "a.b", "ä.txt", "_x", "10", "9"}
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, n := range names {
		if n == "c" {
			e.ok("files.create", obj{"path": p("c", "inner.txt"), "content": "x"}, nil)
			continue
		}
		e.ok("files.create", obj{"path": p(n), "content": n}, nil)
	}
	if err := os.Symlink("a.txt", filepath.Join(e.ws, "link")); err != nil {
		t.Fatal(err)
	}
	var out listOutput
	e.ok("files.list", obj{"path": p()}, &out)
	var got []string
	for _, en := range out.Entries {
		got = append(got, en.Name)
	}
	want := append(slices.Clone(names), "link")
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("entries %v; want %v", got, want)
	}
	for _, en := range out.Entries {
		switch en.Name {
		case "c":
			if en.Kind != kindDirectory || en.Size != nil {
				t.Errorf("c: %+v", en)
			}
		case "link":
			if en.Kind != kindSymlink || en.Size != nil {
				t.Errorf("link: %+v", en)
			}
		default:
			if en.Kind != kindFile || en.Size == nil || *en.Size != int64(len(en.Name)) {
				t.Errorf("%s: %+v", en.Name, en)
			}
		}
	}
	if out.Truncated || out.Path == nil || len(out.Path) != 0 {
		t.Errorf("truncated %v path %v", out.Truncated, out.Path)
	}

	var sub listOutput
	e.ok("files.list", obj{"path": p("c")}, &sub)
	if len(sub.Entries) != 1 || sub.Entries[0].Name != "inner.txt" || !slices.Equal(sub.Path, []string{"c"}) {
		t.Errorf("list c: %+v", sub)
	}
	var empty listOutput
	if err := os.Mkdir(filepath.Join(e.ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.ok("files.list", obj{"path": p("empty")}, &empty)
	if empty.Entries == nil || len(empty.Entries) != 0 {
		t.Errorf("empty directory: %+v", empty)
	}

	e.fail("files.list", obj{"path": p("a.txt")}, kernel.CodeToolExecutionFailed, "not a directory")
	e.fail("files.list", obj{"path": p("nope")}, kernel.CodeToolExecutionFailed, "does not exist")
}

func TestListTruncated(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxResultBytes = 200 })
	for i := range 50 {
		e.write(strings.Repeat("f", 10)+string(rune('a'+i%26))+string(rune('a'+i/26)), "x")
	}
	var out listOutput
	e.ok("files.list", obj{"path": p()}, &out)
	if !out.Truncated || len(out.Entries) == 0 || len(out.Entries) >= 50 {
		t.Fatalf("truncated %v with %d entries", out.Truncated, len(out.Entries))
	}
	if !slices.IsSortedFunc(out.Entries, func(a, b listEntry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("a truncated list is not a sorted prefix")
	}
}

func TestStat(t *testing.T) {
	e := newEnv(t)
	var c createOutput
	e.ok("files.create", obj{"path": p("docs", "a.md"), "content": "hello\n", "metadata": obj{"author": "ann", "tags": []any{"x"}}}, &c)
	var st statOutput
	e.ok("files.stat", obj{"path": p("docs", "a.md")}, &st)
	if st.Kind != kindFile || st.Size == nil || *st.Size != 6 || st.Version != c.Version || st.Version != version([]byte("hello\n")) {
		t.Errorf("stat %+v", st)
	}
	if st.Metadata["author"] != "ann" || !slices.Equal(st.Metadata["tags"].([]any), []any{"x"}) {
		t.Errorf("metadata %v", st.Metadata)
	}
	mt, err := time.Parse(time.RFC3339Nano, st.ModifiedAt)
	if err != nil || !strings.HasSuffix(st.ModifiedAt, "Z") || time.Since(mt) > time.Minute {
		t.Errorf("modifiedAt %q: %v", st.ModifiedAt, err)
	}
	var dir statOutput
	e.ok("files.stat", obj{"path": p("docs")}, &dir)
	if dir.Kind != kindDirectory || dir.Size != nil || dir.Version != "" || dir.Metadata != nil {
		t.Errorf("stat dir %+v", dir)
	}
	var root statOutput
	e.ok("files.stat", obj{"path": p()}, &root)
	if root.Kind != kindDirectory {
		t.Errorf("stat root %+v", root)
	}
	// A symlink inside the workspace to a file inside it is followed.
	if err := os.Symlink("docs/a.md", filepath.Join(e.ws, "alias")); err != nil {
		t.Fatal(err)
	}
	var alias statOutput
	e.ok("files.stat", obj{"path": p("alias")}, &alias)
	if alias.Kind != kindFile || alias.Version != c.Version || alias.Metadata["author"] != "ann" {
		t.Errorf("stat through an in-workspace link: %+v", alias)
	}
	e.fail("files.stat", obj{"path": p("nope")}, kernel.CodeToolExecutionFailed, "does not exist")
	e.fail("files.stat", obj{"path": p("docs", "a.md", "below")}, kernel.CodeToolExecutionFailed, "not a directory")
}

func TestRead(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxReadBytes = 1000 })
	e.write("text.txt", "héllo\nworld\n")
	e.write("nul.bin", "abc\x00def")
	e.write("latin1.txt", "caf\xe9")
	e.write("empty", "")
	e.write("big.txt", strings.Repeat("x", 1001))
	e.write("exact.txt", strings.Repeat("y", 1000))
	e.write("dir/inner", "i")
	for _, tc := range []struct {
		name, path, encoding, content string
	}{
		{"utf-8 text", "text.txt", "utf-8", "héllo\nworld\n"},
		{"NUL byte", "nul.bin", "base64", base64.StdEncoding.EncodeToString([]byte("abc\x00def"))},
		{"invalid UTF-8", "latin1.txt", "base64", base64.StdEncoding.EncodeToString([]byte("caf\xe9"))},
		{"empty", "empty", "utf-8", ""},
		{"exactly at the cap", "exact.txt", "utf-8", strings.Repeat("y", 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			var out readOutput
			e.ok("files.read", obj{"path": p(tc.path)}, &out)
			raw := e.readWS(tc.path)
			if out.Encoding != tc.encoding || out.Content != tc.content || out.Size != int64(len(raw)) || out.Version != version([]byte(raw)) || !slices.Equal(out.Path, []string{tc.path}) {
				t.Errorf("read %+v", out)
			}
		})
	}
	res := e.fail("files.read", obj{"path": p("big.txt")}, kernel.CodeToolExecutionFailed, "1001 bytes")
	for _, want := range []string{"at most 1000 bytes", "files.grep"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("large-file message %q does not mention %q", res.Message, want)
		}
	}
	e.fail("files.read", obj{"path": p("dir")}, kernel.CodeToolExecutionFailed, "is a directory; use files.list")
	e.fail("files.read", obj{"path": p()}, kernel.CodeToolExecutionFailed, "is a directory")
	e.fail("files.read", obj{"path": p("missing")}, kernel.CodeToolExecutionFailed, "does not exist")
}
