package files

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// FuzzPathSegments feeds arbitrary segments to policy.ValidateSegment and, when it
// accepts them, through files.create, files.stat and files.delete in a workspace
// nested three directories deep. A single segment can climb at most one level and
// two segments two, so any escape would leave an entry in one of the directories
// around the workspace; the test checks they hold exactly what they should, and
// that what create made is where the segments say, inside the workspace.
//
// It lives here rather than in policy so that policy's tests do not depend on a
// package built on top of policy.
func FuzzPathSegments(f *testing.F) {
	for _, s := range [][2]string{
		{"a", "b"}, {"..", "x"}, {".", "."}, {"/etc", "passwd"}, {"a/b", "c"}, {"a\x00b", "c"},
		{`..\..`, "x"}, {"...", ".."}, {"~", "$HOME"}, {"é", "\u202e"}, {"\xff", "a"}, {"a\u2028b", "c"},
		{strings.Repeat("x", 256), "y"}, {strings.Repeat("é", 200), "z"}, {" ", "\t"}, {"-", "--"},
		{"state", "ws"}, {".sharedos-tmp-x", "a"}, {"CON", "nul"}, {"a:b", "c"},
	} {
		f.Add(s[0], s[1])
	}
	base := f.TempDir()
	mid := filepath.Join(base, "a")
	top := filepath.Join(mid, "b")
	ws := filepath.Join(top, "ws")
	state := filepath.Join(top, "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		f.Fatal(err)
	}
	w, err := Open(Options{Workspace: ws, StateDir: state})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { w.Close() })
	tools := map[string]kernel.Tool{}
	for _, t := range w.Tools() {
		tools[t.Name] = t
	}
	run := func(name string, args map[string]any) (any, error) {
		tool := tools[name]
		req, err := tool.Requirement(args, testContext())
		if err != nil {
			return nil, err
		}
		return tool.Handler(context.Background(), kernel.Invocation{Arguments: args, Requirement: req})
	}
	onlyHolds := func(t *testing.T, dir string, want ...string) {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range ents {
			names = append(names, d.Name())
		}
		if !slices.Equal(names, want) {
			t.Fatalf("%s holds %q; want %q", dir, names, want)
		}
	}

	f.Fuzz(func(t *testing.T, a, b string) {
		errA, errB := policy.ValidateSegment(a), policy.ValidateSegment(b)
		for _, tc := range []struct {
			path  []string
			valid bool
		}{{[]string{a}, errA == nil}, {[]string{a, b}, errA == nil && errB == nil}, {[]string{"d", a}, errA == nil}} {
			path, valid := tc.path, tc.valid
			args := map[string]any{"path": toAny(path), "content": "fuzz"}
			_, reqErr := tools["files.create"].Requirement(args, testContext())
			if (reqErr == nil) != valid || (policy.ValidatePath(path) == nil) != valid {
				t.Fatalf("%q: requirement says %v, segments say valid=%v", path, reqErr, valid)
			}
			_, createErr := run("files.create", args)
			if !valid {
				if createErr == nil {
					t.Fatalf("%q: create accepted an invalid path", path)
				}
				continue
			}
			if createErr == nil {
				// Join is exact here: valid segments hold no separator and are not "." or "..".
				data, err := os.ReadFile(filepath.Join(append([]string{ws}, path...)...))
				if err != nil || string(data) != "fuzz" {
					t.Fatalf("%q: created, but not found inside the workspace: %v", path, err)
				}
				if _, err := run("files.stat", map[string]any{"path": toAny(path)}); err != nil {
					t.Fatalf("%q: stat after create: %v", path, err)
				}
			}
			if _, err := os.Lstat(filepath.Join(ws, path[0])); err == nil {
				if _, err := run("files.delete", map[string]any{"path": toAny(path[:1]), "recursive": true}); err != nil {
					t.Fatalf("%q: delete: %v", path, err)
				}
			}
			onlyHolds(t, ws)
			onlyHolds(t, top, "state", "ws")
			onlyHolds(t, mid, "b")
			onlyHolds(t, base, "a")
		}
	})
}

func toAny(p []string) []any {
	out := make([]any, len(p))
	for i, s := range p {
		out[i] = s
	}
	return out
}
