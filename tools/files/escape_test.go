package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

const escapeMsg = "path escapes the workspace"

// plantEscapes puts the links the escape tests use into the workspace.
func plantEscapes(t *testing.T, e *env) {
	t.Helper()
	sentinel := filepath.Join(e.outside, "sentinel")
	rel, err := filepath.Rel(e.ws, sentinel)
	if err != nil {
		t.Fatal(err)
	}
	relDir, _ := filepath.Rel(e.ws, e.outside)
	e.write("inside/ok.txt", "inside")
	for _, l := range []struct{ target, name string }{
		{"/etc/passwd", "passwd"},
		{sentinel, "sentinel-abs"},
		{rel, "sentinel-rel"},
		{e.outside, "outdir-abs"},
		{relDir, "outdir-rel"},
		{"../" + relDir, "inside/outdir-deep"},
		{filepath.Join(e.ws, "inside", "ok.txt"), "abs-but-inside"},
		{"chain2", "chain1"},
		{"sentinel-rel", "chain2"},
	} {
		if err := os.Symlink(l.target, filepath.Join(e.ws, filepath.FromSlash(l.name))); err != nil {
			t.Fatal(err)
		}
	}
}

// Every use of a link that leads out of the workspace is refused with a clear
// message and touches nothing outside. Writes are aimed at links to the sentinel,
// never at /etc/passwd: the suite may run as root, and a regression must not be
// able to damage the host.
func TestSymlinkEscapesRefused(t *testing.T) {
	e := newEnv(t)
	plantEscapes(t, e)
	passwd, _ := os.ReadFile("/etc/passwd")
	fileLinks := []string{"sentinel-abs", "sentinel-rel", "chain1"}
	dirLinks := []string{"outdir-abs", "outdir-rel", "inside/outdir-deep"}
	type call struct {
		tool string
		args obj
	}
	var calls []call
	for _, l := range []string{"passwd", "sentinel-abs", "sentinel-rel", "chain1", "abs-but-inside"} {
		path := strings.Split(l, "/")
		calls = append(calls,
			call{"files.read", obj{"path": path}},
			call{"files.stat", obj{"path": path}},
			call{"files.delete", obj{"path": path}},
			call{"files.snapshot.create", obj{"path": path}},
			call{"files.grep", obj{"path": path, "pattern": "x"}},
			call{"files.search", obj{"path": path, "query": "x"}},
		)
	}
	for _, l := range fileLinks {
		path := strings.Split(l, "/")
		calls = append(calls,
			call{"files.replace", obj{"path": path, "content": "pwned"}},
			call{"files.replace", obj{"path": path, "content": "pwned", "expectedVersion": version([]byte("SENTINEL outside content\n"))}},
			call{"files.append", obj{"path": path, "content": "pwned"}},
		)
	}
	for _, l := range dirLinks {
		path := strings.Split(l, "/")
		through := append(strings.Split(l, "/"), "sentinel")
		created := append(strings.Split(l, "/"), "new.txt")
		calls = append(calls,
			call{"files.list", obj{"path": path}},
			call{"files.stat", obj{"path": path}},
			call{"files.read", obj{"path": through}},
			call{"files.stat", obj{"path": through}},
			call{"files.replace", obj{"path": through, "content": "pwned"}},
			call{"files.append", obj{"path": through, "content": "pwned"}},
			call{"files.delete", obj{"path": through}},
			call{"files.delete", obj{"path": path, "recursive": true}},
			call{"files.create", obj{"path": created, "content": "pwned"}},
			call{"files.create", obj{"path": append(strings.Split(l, "/"), "sub", "new.txt"), "content": "pwned"}},
			call{"files.grep", obj{"path": path, "pattern": "SENTINEL"}},
			call{"files.search", obj{"path": path, "query": "sentinel"}},
			call{"files.snapshot.create", obj{"path": path}},
			call{"files.snapshot.list", obj{"path": path}}, // lists nothing, touches nothing
		)
	}
	for _, c := range calls {
		t.Run(fmt.Sprintf("%s %v", c.tool, c.args["path"]), func(t *testing.T) {
			e := e.in(t)
			res := e.call(c.tool, c.args)
			if c.tool == "files.snapshot.list" {
				if res.Status != kernel.Succeeded {
					t.Fatalf("%s: %s", res.Code, res.Message)
				}
				return
			}
			if res.Status == kernel.Succeeded {
				t.Fatalf("succeeded: %+v", res.Output)
			}
			if res.Code != kernel.CodeToolExecutionFailed || !strings.Contains(res.Message, escapeMsg) {
				t.Fatalf("%s: %q; want a message saying %q", res.Code, res.Message, escapeMsg)
			}
			if strings.Contains(res.Message, e.outside) || strings.Contains(res.Message, "SENTINEL") {
				t.Errorf("the message leaks the outside: %q", res.Message)
			}
			e.checkOutside()
		})
	}
	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(passwd) {
		t.Fatal("/etc/passwd changed")
	}
	for _, l := range append(fileLinks, dirLinks...) {
		if fi, err := os.Lstat(filepath.Join(e.ws, filepath.FromSlash(l))); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("link %s was removed or replaced", l)
		}
	}
	if e.exists("new.txt") || e.exists("sub") {
		t.Error("a create through a link landed at the workspace root")
	}
	e.checkOutside()
}

// Links that stay inside the workspace keep working.
func TestInsideSymlinksWork(t *testing.T) {
	e := newEnv(t)
	e.write("real/dir/f.txt", "hello")
	for _, l := range []struct{ target, name string }{
		{"real/dir/f.txt", "flink"},
		{"real", "dlink"},
		{"../real/dir", "real/up"}, // climbs, but not above the root
		{"dlink/dir/f.txt", "chain"},
	} {
		if err := os.Symlink(l.target, filepath.Join(e.ws, filepath.FromSlash(l.name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range [][]string{{"flink"}, {"dlink", "dir", "f.txt"}, {"real", "up", "f.txt"}, {"chain"}} {
		var r readOutput
		e.ok("files.read", obj{"path": path}, &r)
		if r.Content != "hello" {
			t.Errorf("%v: %q", path, r.Content)
		}
	}
	var l listOutput
	e.ok("files.list", obj{"path": p("dlink", "dir")}, &l)
	if len(l.Entries) != 1 || l.Entries[0].Name != "f.txt" {
		t.Errorf("list through a link: %+v", l.Entries)
	}
	e.ok("files.create", obj{"path": p("dlink", "new.txt"), "content": "n"}, nil)
	if e.readWS("real/new.txt") != "n" {
		t.Error("create through an inside link did not land in its target")
	}
	e.ok("files.append", obj{"path": p("chain"), "content": "!"}, nil)
	if e.readWS("real/dir/f.txt") != "hello!" {
		t.Errorf("append through a chain: %q", e.readWS("real/dir/f.txt"))
	}
}

// Bad segments never reach a handler: the requirement refuses them and the kernel
// answers invalid_tool_arguments, for every tool.
func TestBadSegmentsRefusedByRequirement(t *testing.T) {
	e := newEnv(t)
	e.write("a/b", "x")
	extra := map[string]obj{
		"files.search": {"query": "x"}, "files.grep": {"pattern": "x"}, "files.create": {"content": "x"},
		"files.replace": {"content": "x"}, "files.append": {"content": "x"}, "files.snapshot.restore": {"snapshotId": "snap-20260101T000000Z-00000000"},
	}
	long := make([]string, 65)
	for i := range long {
		long[i] = "a"
	}
	for _, tc := range []struct {
		name string
		path []string
		want string
	}{
		{"dot-dot", []string{".."}, "not allowed"},
		{"dot-dot below", []string{"a", ".."}, "not allowed"},
		{"dot", []string{"."}, "not allowed"},
		{"absolute", []string{"/etc"}, "separator"},
		{"slash", []string{"a/b"}, "separator"},
		{"backslash", []string{`a\b`}, "separator"},
		{"NUL", []string{"a\x00b"}, "control character"},
		{"newline", []string{"a\nb"}, "control character"},
		{"empty", []string{""}, "empty"},
		{"too long", []string{strings.Repeat("x", 257)}, "at most 256"},
	} {
		for _, tool := range e.w.Tools() {
			t.Run(tc.name+" "+tool.Name, func(t *testing.T) {
				args := obj{"path": tc.path}
				for k, v := range extra[tool.Name] {
					args[k] = v
				}
				e.in(t).fail(tool.Name, args, kernel.CodeInvalidToolArguments, tc.want)
			})
		}
	}
	// 65 segments are refused by the schema before the requirement.
	e.fail("files.stat", obj{"path": long}, kernel.CodeInvalidToolArguments, "")
	if ents, _ := os.ReadDir(e.ws); len(ents) != 1 {
		t.Errorf("the workspace changed: %d entries", len(ents))
	}
	e.checkOutside()
}

// Handlers called without the kernel still refuse bad paths, including ones JSON
// cannot carry (invalid UTF-8 becomes U+FFFD on the wire).
func TestHandlerRevalidatesPath(t *testing.T) {
	e := newEnv(t)
	for _, bad := range []any{[]any{"..", "x"}, []any{"a\xffb"}, []string{"a", "/"}, []any{1}, "a", nil} {
		for _, tool := range e.w.Tools() {
			args := map[string]any{"path": bad, "content": "x", "query": "x", "pattern": "x", "snapshotId": "x"}
			if _, err := tool.Requirement(args, testContext()); err == nil {
				t.Errorf("%s: requirement accepted %#v", tool.Name, bad)
			}
			if _, err := tool.Handler(context.Background(), kernel.Invocation{Arguments: args}); err == nil {
				t.Errorf("%s: handler accepted %#v", tool.Name, bad)
			}
		}
	}
	if ents, _ := os.ReadDir(e.ws); len(ents) != 0 {
		t.Errorf("the workspace changed: %d entries", len(ents))
	}
	e.checkOutside()
}

// One goroutine keeps swapping a workspace path between a regular file and a link
// to the sentinel outside, while others read, replace, append and stat it. No call
// may ever see or change the sentinel: os.Root checks every component at the
// moment of use, so the race between our resolution and the operation is harmless.
func TestSymlinkSwapRace(t *testing.T) {
	e := newEnv(t)
	sentinel := filepath.Join(e.outside, "sentinel")
	relSentinel, _ := filepath.Rel(e.ws, sentinel)
	scratch := filepath.Join(e.ws, ".scratch")
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(e.ws, "swap")
	if err := os.WriteFile(target, []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := filepath.Join(scratch, fmt.Sprint(i))
			var err error
			switch i % 3 {
			case 0:
				err = os.WriteFile(tmp, []byte("inside"), 0o644)
			case 1:
				err = os.Symlink(sentinel, tmp)
			case 2:
				err = os.Symlink(relSentinel, tmp)
			}
			if err == nil {
				err = os.Rename(tmp, target)
			}
			if err != nil {
				t.Errorf("swapping: %v", err)
				return
			}
		}
	})

	var ok, refused atomic.Int64
	deadline := time.Now().Add(10 * time.Second)
	minRun := time.Now().Add(time.Second)
	var callers sync.WaitGroup
	for g := range 4 {
		callers.Go(func() {
			for i := 0; ; i++ {
				if time.Now().After(deadline) || (time.Now().After(minRun) && ok.Load() > 20 && refused.Load() > 20) {
					return
				}
				var res kernel.Result
				switch (g + i) % 4 {
				case 0:
					res = e.call("files.read", obj{"path": p("swap")})
				case 1:
					res = e.call("files.replace", obj{"path": p("swap"), "content": "replaced"})
				case 2:
					res = e.call("files.append", obj{"path": p("swap"), "content": "+"})
				case 3:
					res = e.call("files.stat", obj{"path": p("swap")})
				}
				if res.Status == kernel.Succeeded {
					ok.Add(1)
					if r, isRead := res.Output.(readOutput); isRead && strings.Contains(r.Content, "SENTINEL") {
						t.Errorf("read returned the sentinel's content")
						return
					}
					if st, isStat := res.Output.(statOutput); isStat && st.Version == version([]byte("SENTINEL outside content\n")) {
						t.Errorf("stat hashed the sentinel")
						return
					}
					continue
				}
				if strings.Contains(res.Message, "SENTINEL") {
					t.Errorf("a failure leaked the sentinel: %s", res.Message)
				}
				refused.Add(1)
			}
		})
	}
	callers.Wait()
	close(stop)
	swapper.Wait()
	t.Logf("%d calls succeeded, %d were refused", ok.Load(), refused.Load())
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("the race was not exercised: %d succeeded, %d refused", ok.Load(), refused.Load())
	}
	e.checkOutside()
}
