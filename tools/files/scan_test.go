package files

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/kernel"
)

func grepSummary(out grepOutput) []string {
	var s []string
	for _, m := range out.Matches {
		s = append(s, fmt.Sprintf("%s:%d:%s", strings.Join(m.Path, "/"), m.Line, m.Text))
	}
	return s
}

func TestGrep(t *testing.T) {
	e := newEnv(t)
	files := map[string]string{
		"b.txt":       "alpha\nBeta\nbeta gamma\n",
		"a.txt":       "one\ntwo beta\nthree\nfour\nfive\n",
		"sub/c.md":    "no match here\r\nBETA in crlf\r\n",
		"sub/bin.dat": "beta\x00binary",
		"a-b.txt":     "beta dash",
		"z/deep/x.go": "x := \"beta\" // (beta)",
	}
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		e.write(k, files[k])
	}
	for _, tc := range []struct {
		name string
		args obj
		want []string
	}{
		{"literal case-sensitive in segment order", obj{"path": p(), "pattern": "beta"},
			[]string{"a-b.txt:1:beta dash", "a.txt:2:two beta", "b.txt:3:beta gamma", `z/deep/x.go:1:x := "beta" // (beta)`}},
		{"literal case-insensitive", obj{"path": p("sub"), "pattern": "beta", "caseSensitive": false},
			[]string{"sub/c.md:2:BETA in crlf"}},
		{"literal is not a regex", obj{"path": p("z"), "pattern": "(beta)"},
			[]string{`z/deep/x.go:1:x := "beta" // (beta)`}},
		{"regex", obj{"path": p(), "pattern": `^[Bb]eta$`, "mode": "regex"},
			[]string{"b.txt:2:Beta"}},
		{"regex case-insensitive", obj{"path": p("b.txt"), "pattern": `^b.ta`, "mode": "regex", "caseSensitive": false},
			[]string{"b.txt:2:Beta", "b.txt:3:beta gamma"}},
		{"single file", obj{"path": p("a.txt"), "pattern": "t"},
			[]string{"a.txt:2:two beta", "a.txt:3:three"}},
		{"no match", obj{"path": p(), "pattern": "zzz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			var out grepOutput
			e.ok("files.grep", tc.args, &out)
			if got := grepSummary(out); !slices.Equal(got, tc.want) {
				t.Errorf("matches %q; want %q", got, tc.want)
			}
			if out.Truncated || out.Matches == nil {
				t.Errorf("truncated %v matches %v", out.Truncated, out.Matches)
			}
		})
	}
	var out grepOutput
	e.ok("files.grep", obj{"path": p(), "pattern": "beta"}, &out)
	if out.SkippedCount != 1 || len(out.Skipped) != 1 || !slices.Equal(out.Skipped[0].Path, []string{"sub", "bin.dat"}) || out.Skipped[0].Reason != skipBinary {
		t.Errorf("skipped %+v (%d)", out.Skipped, out.SkippedCount)
	}
	if out.FilesScanned != 5 {
		t.Errorf("filesScanned %d; want 5", out.FilesScanned)
	}

	res := e.fail("files.grep", obj{"path": p(), "pattern": "(unclosed", "mode": "regex"}, kernel.CodeToolExecutionFailed, "invalid regular expression")
	if !strings.Contains(res.Message, "missing closing )") {
		t.Errorf("the compile error is not passed on: %s", res.Message)
	}
	e.fail("files.grep", obj{"path": p(), "pattern": "x", "mode": "glob"}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.grep", obj{"path": p(), "pattern": "x", "contextBefore": 101}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.grep", obj{"path": p(), "pattern": ""}, kernel.CodeToolExecutionFailed, "pattern is empty")
	e.fail("files.grep", obj{"path": p("missing"), "pattern": "x"}, kernel.CodeToolExecutionFailed, "does not exist")
}

// Case-insensitive literals fold Unicode as strings.EqualFold does, and are still
// literals: regex metacharacters match themselves.
func TestGrepCaseFolding(t *testing.T) {
	e := newEnv(t)
	e.write("f", "ÄRGER über alles\nplain\nA.B*C\nKelvin \u212a\n")
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"ärger", []string{"f:1:ÄRGER über alles"}},
		{"ÜBER", []string{"f:1:ÄRGER über alles"}},
		{"a.b*c", []string{"f:3:A.B*C"}},
		{"kelvin k", []string{"f:4:Kelvin \u212a"}},
		{"a.b", []string{"f:3:A.B*C"}},
	} {
		var out grepOutput
		e.ok("files.grep", obj{"path": p(), "pattern": tc.pattern, "caseSensitive": false}, &out)
		if got := grepSummary(out); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q; want %q", tc.pattern, got, tc.want)
		}
	}
	var out grepOutput
	e.ok("files.grep", obj{"path": p(), "pattern": "ärger"}, &out)
	if len(out.Matches) != 0 {
		t.Errorf("case-sensitive literal matched %q", grepSummary(out))
	}
}

func TestGrepContext(t *testing.T) {
	e := newEnv(t)
	e.write("f", "l1\nl2\nHIT3\nl4\nl5\nl6\nHIT7\n")
	var out grepOutput
	e.ok("files.grep", obj{"path": p("f"), "pattern": "HIT", "contextBefore": 2, "contextAfter": 1}, &out)
	if len(out.Matches) != 2 {
		t.Fatalf("matches %+v", out.Matches)
	}
	m := out.Matches[0]
	if m.Line != 3 || !slices.Equal(m.Before, []string{"l1", "l2"}) || !slices.Equal(m.After, []string{"l4"}) {
		t.Errorf("first %+v", m)
	}
	m = out.Matches[1]
	if m.Line != 7 || !slices.Equal(m.Before, []string{"l5", "l6"}) || len(m.After) != 0 || m.After == nil {
		t.Errorf("second %+v", m)
	}
	e.ok("files.grep", obj{"path": p("f"), "pattern": "l1", "contextBefore": 100, "contextAfter": 100}, &out)
	if m := out.Matches[0]; len(m.Before) != 0 || len(m.After) != 6 {
		t.Errorf("context at the edges %+v", m)
	}
}

func TestGrepTruncation(t *testing.T) {
	t.Run("match cap", func(t *testing.T) {
		e := newEnv(t)
		e.write("many", strings.Repeat("x\n", MaxGrepMatches+5))
		var out grepOutput
		e.ok("files.grep", obj{"path": p(), "pattern": "x"}, &out)
		if !out.Truncated || len(out.Matches) != MaxGrepMatches {
			t.Errorf("truncated %v with %d matches", out.Truncated, len(out.Matches))
		}
		e.write("exact", strings.Repeat("y\n", MaxGrepMatches))
		out = grepOutput{}
		e.ok("files.grep", obj{"path": p("exact"), "pattern": "y"}, &out)
		if out.Truncated || len(out.Matches) != MaxGrepMatches {
			t.Errorf("exactly at the cap: truncated %v with %d matches", out.Truncated, len(out.Matches))
		}
	})
	t.Run("result bytes", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.MaxResultBytes = 1000 })
		for i := range 20 {
			e.write(fmt.Sprintf("f%02d", i), "needle in a line of some length\n")
		}
		var out grepOutput
		e.ok("files.grep", obj{"path": p(), "pattern": "needle"}, &out)
		if !out.Truncated || len(out.Matches) == 0 || len(out.Matches) >= 20 {
			t.Errorf("truncated %v with %d matches", out.Truncated, len(out.Matches))
		}
		if out.Matches[0].Path[0] != "f00" {
			t.Errorf("first match %v", out.Matches[0].Path)
		}
	})
	t.Run("long lines cut", func(t *testing.T) {
		e := newEnv(t)
		long := strings.Repeat("é", MaxLineBytes) // 2 bytes a rune
		e.write("long", "ctx "+long+"\nhit "+long+"\n")
		var out grepOutput
		e.ok("files.grep", obj{"path": p(), "pattern": "hit", "contextBefore": 1}, &out)
		m := out.Matches[0]
		for _, s := range []string{m.Text, m.Before[0]} {
			if !strings.HasSuffix(s, "…") || len(s) > MaxLineBytes+len("…") || !strings.HasPrefix(m.Text, "hit é") {
				t.Errorf("line not cut: %d bytes, %q…", len(s), s[:10])
			}
		}
	})
	t.Run("large files skipped", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.MaxScanBytes = 100 })
		e.write("big", strings.Repeat("needle\n", 20))
		e.write("small", "needle\n")
		var out grepOutput
		e.ok("files.grep", obj{"path": p(), "pattern": "needle"}, &out)
		if len(out.Matches) != 1 || out.SkippedCount != 1 || out.Skipped[0].Reason != skipTooLarge || *out.Skipped[0].Size != 140 {
			t.Errorf("matches %d skipped %+v", len(out.Matches), out.Skipped)
		}
	})
}

func TestSearchRanking(t *testing.T) {
	e := newEnv(t)
	files := map[string]string{
		"notes/budget-plan.md": "The quarterly budget plan.\nbudget items\n",
		"notes/misc.txt":       "nothing relevant\nplan for lunch\n",
		"notes/other.txt":      "a budget\nsome plan\n",
		"notes/phrase.txt":     "we need a Budget Plan today\n",
		"notes/none.txt":       "unrelated\n",
		"notes/image.png":      "budget\x00plan",
	}
	for k, v := range files {
		e.write(k, v)
	}
	var out searchOutput
	e.ok("files.search", obj{"path": p("notes"), "query": "Budget plan"}, &out)
	var got []string
	for _, r := range out.Results {
		got = append(got, fmt.Sprintf("%s=%d/%d", strings.Join(r.Path, "/"), r.Score, r.Matches))
	}
	// budget-plan.md: name 3+3, content 2+2, 2 lines, phrase 5 = 17
	// phrase.txt: content 2+2, 1 line, phrase 5 = 10
	// other.txt: content 2+2, 2 lines = 6
	// misc.txt: content 2, 1 line = 3
	want := []string{"notes/budget-plan.md=17/2", "notes/phrase.txt=10/1", "notes/other.txt=6/2", "notes/misc.txt=3/1"}
	if !slices.Equal(got, want) {
		t.Fatalf("ranking %v; want %v", got, want)
	}
	if out.Results[0].Snippet != "The quarterly budget plan." || out.Total != 4 || out.Truncated {
		t.Errorf("snippet %q total %d truncated %v", out.Results[0].Snippet, out.Total, out.Truncated)
	}
	if out.SkippedCount != 1 || out.Skipped[0].Reason != skipBinary || out.FilesScanned != 5 {
		t.Errorf("skipped %+v scanned %d", out.Skipped, out.FilesScanned)
	}

	e.ok("files.search", obj{"path": p(), "query": "budget plan", "limit": 2}, &out)
	if len(out.Results) != 2 || out.Total != 4 || out.Results[1].Path[1] != "phrase.txt" {
		t.Errorf("limit: %+v", out.Results)
	}
	e.fail("files.search", obj{"path": p(), "query": "x", "limit": 0}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.search", obj{"path": p(), "query": "x", "limit": 101}, kernel.CodeInvalidToolArguments, "")
	e.fail("files.search", obj{"path": p(), "query": " -- "}, kernel.CodeToolExecutionFailed, "no words")
}

// Ties are broken by path in segment order, and the results are the same
// whatever order the files were created in.
func TestSearchDeterministic(t *testing.T) {
	names := []string{"b", "a", "a-b", "a/b", "c/a", "ab", "B"}
	var first []string
	for round := range 3 {
		e := newEnv(t)
		order := slices.Clone(names)
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, n := range order {
			e.write(n+"/f.txt", "same words here\n")
		}
		var out searchOutput
		e.ok("files.search", obj{"path": p(), "query": "words"}, &out)
		var got []string
		for _, r := range out.Results {
			got = append(got, strings.Join(r.Path, "/"))
		}
		if round == 0 {
			first = got
			want := []string{"B/f.txt", "a/b/f.txt", "a/f.txt", "a-b/f.txt", "ab/f.txt", "b/f.txt", "c/a/f.txt"}
			if !slices.Equal(got, want) {
				t.Fatalf("order %v; want %v", got, want)
			}
		} else if !slices.Equal(got, first) {
			t.Fatalf("round %d: %v; first %v", round, got, first)
		}
	}
}

func TestSearchTruncatedAndSnippet(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxResultBytes = 600 })
	for i := range 30 {
		e.write(fmt.Sprintf("f%02d", i), "   "+strings.Repeat("word ", 100)+"\n")
	}
	var out searchOutput
	e.ok("files.search", obj{"path": p(), "query": "word", "limit": 30}, &out)
	if !out.Truncated || len(out.Results) == 0 || len(out.Results) >= 30 {
		t.Errorf("truncated %v with %d results", out.Truncated, len(out.Results))
	}
	if s := out.Results[0].Snippet; len([]rune(s)) != 200 || !strings.HasPrefix(s, "word") {
		t.Errorf("snippet %d runes: %q", len([]rune(s)), s)
	}
}

// Walks neither follow symlinked directories nor read symlinked files: a link
// cycle terminates and a link out of the workspace is never read.
func TestScanDoesNotFollowSymlinks(t *testing.T) {
	e := newEnv(t)
	e.write("d/f.txt", "SENTINEL inside\n")
	for _, l := range []struct{ target, name string }{
		{"..", "d/loop"},
		{e.outside, "out"},
		{filepath.Join(e.outside, "sentinel"), "sentinel-link"},
		{"f.txt", "d/alias"},
	} {
		if err := os.Symlink(l.target, filepath.Join(e.ws, filepath.FromSlash(l.name))); err != nil {
			t.Fatal(err)
		}
	}
	var g grepOutput
	e.ok("files.grep", obj{"path": p(), "pattern": "SENTINEL"}, &g)
	if got := grepSummary(g); !slices.Equal(got, []string{"d/f.txt:1:SENTINEL inside"}) {
		t.Errorf("grep %v", got)
	}
	if g.SkippedCount != 4 {
		t.Errorf("skipped %+v", g.Skipped)
	}
	for _, s := range g.Skipped {
		if s.Reason != skipSymlink {
			t.Errorf("skipped %+v", s)
		}
	}
	var s searchOutput
	e.ok("files.search", obj{"path": p(), "query": "sentinel"}, &s)
	if len(s.Results) != 1 || strings.Join(s.Results[0].Path, "/") != "d/f.txt" {
		t.Errorf("search %+v", s.Results)
	}
	e.checkOutside()
}
