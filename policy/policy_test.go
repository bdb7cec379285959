package policy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-run/internal/vectors"
)

func TestUTF16Len(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"é", 1}, {"日本", 2}, {"😀", 2}, {"a😀b", 4}, {"\xed\xa0\x80", 1},
	}
	for _, tc := range cases {
		if got := UTF16Len(tc.in); got != tc.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestToolNames(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"files.read", true}, {"a", true}, {"A-b_c.9", true}, {strings.Repeat("x", 128), true},
		{"", false}, {strings.Repeat("x", 129), false}, {"files/read", false}, {"mcp__sharedos__files read", false}, {"é", false},
	}
	for _, tc := range cases {
		if err := ValidateToolName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateToolName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestIdentifiers(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"  world-1 ", "world-1", true},
		{strings.Repeat("日", 256), strings.Repeat("日", 256), true},
		{strings.Repeat("😀", 128), strings.Repeat("😀", 128), true}, // 256 UTF-16 units
		{strings.Repeat("😀", 129), "", false},                      // 258 units, though only 129 runes
		{"   ", "", false},
		{"", "", false},
	}
	for _, tc := range cases {
		got, err := NormalizeIdentifier("id", tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("NormalizeIdentifier(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestSegments(t *testing.T) {
	cases := []struct {
		seg string
		ok  bool
	}{
		{"README.md", true}, {"..a", true}, {"日本語", true}, {".hidden", true}, {strings.Repeat("a", 256), true},
		{"", false}, {".", false}, {"..", false}, {"a/b", false}, {"/etc", false}, {`a\b`, false},
		{"a\x00b", false}, {"a\nb", false}, {"\x7f", false}, {strings.Repeat("a", 257), false}, {"\xff", false},
	}
	for _, tc := range cases {
		if err := ValidateSegment(tc.seg); (err == nil) != tc.ok {
			t.Errorf("ValidateSegment(%q) = %v, want ok=%v", tc.seg, err, tc.ok)
		}
	}
	if err := ValidatePath(make([]string, 65)); err == nil {
		t.Error("65 segments accepted")
	}
	if err := ValidatePath([]string{}); err != nil {
		t.Errorf("empty path refused: %v", err)
	}
}

func TestActors(t *testing.T) {
	for _, s := range []string{"human:u1", "agent:agent-bob", "group:conv:42", "service:ci"} {
		a, err := ParseActor(s)
		if err != nil {
			t.Errorf("ParseActor(%q): %v", s, err)
			continue
		}
		if got, _ := CanonicalActor(a); got != s {
			t.Errorf("CanonicalActor(%q) = %q", s, got)
		}
	}
	for _, s := range []string{"robot:x", "agent:", "agent", ":x", "agent: x", "Agent:x", "agent:" + strings.Repeat("x", 300)} {
		if _, err := ParseActor(s); err == nil {
			t.Errorf("ParseActor(%q) accepted", s)
		}
	}
}

func TestToolPolicyVectors(t *testing.T) {
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Policies) == 0 {
		t.Fatal("no policy vectors")
	}
	for _, pv := range v.Policies {
		t.Run(pv.Name, func(t *testing.T) {
			p, err := ParseToolPolicy(pv.Policy)
			if err != nil {
				t.Fatal(err)
			}
			h, err := p.Hash()
			if err != nil {
				t.Fatal(err)
			}
			if h != pv.PolicyHash {
				t.Fatalf("policyHash %s, want %s", h, pv.PolicyHash)
			}
		})
	}
}

func TestToolPolicyRules(t *testing.T) {
	cases := []struct {
		in      string
		wantErr string
		want    string // canonical JSON-ish summary: mode and lists
	}{
		{in: `{}`, want: "strict [sharedos] [] []"},
		{in: `{"harnessLocal":["TodoWrite"]}`, want: "strict [sharedos] [TodoWrite] []"},
		{in: `{"externalDirect":["github"]}`, want: "hybrid [sharedos] [] [github]"},
		{in: `{"mode":"strict","externalDirect":["github"]}`, wantErr: "a strict tool policy cannot declare externally connected tools"},
		{in: `{"managedMcp":[]}`, wantErr: "managedMcp: at least one"},
		{in: `{"mode":"lenient"}`, wantErr: "mode:"},
		{in: `{"extra":1}`, wantErr: "unknown field"},
		{in: `{"harnessLocal":["bad name"]}`, wantErr: "harnessLocal[0]"},
		{in: `{"harnessLocal":["a","a"]}`, wantErr: "listed twice"},
		{in: `{"managedMcp":["  "]}`, wantErr: "managedMcp[0]"},
		{in: `{} {}`, wantErr: "trailing"},
	}
	for _, tc := range cases {
		p, err := ParseToolPolicy([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := fmt.Sprint(p.Mode, " ", p.ManagedMCP, " ", p.HarnessLocal, " ", p.ExternalDirect); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestClassify(t *testing.T) {
	p := ToolPolicy{Mode: ModeHybrid, ManagedMCP: []string{"sharedos"}, HarnessLocal: []string{"TodoWrite"}, ExternalDirect: []string{"github"}}
	cases := []struct {
		server, tool string
		class        ToolClass
		ok           bool
	}{
		{"", "TodoWrite", ClassHarnessLocal, true},
		{"", "Bash", "", false},
		{"sharedos", "files.read", ClassManaged, true},
		{"github", "search", ClassExternalDirect, true},
		{"slack", "post", "", false},
	}
	for _, tc := range cases {
		c, ok := p.Classify(tc.server, tc.tool)
		if c != tc.class || ok != tc.ok {
			t.Errorf("Classify(%q,%q) = %q,%v", tc.server, tc.tool, c, ok)
		}
	}
}

func TestNamespacePatch(t *testing.T) {
	cases := []struct {
		start []string
		patch NamespacePatch
		want  string
	}{
		{nil, NamespacePatch{Enable: []string{"files"}}, "[files]"},
		{[]string{"files"}, NamespacePatch{Enable: []string{"files"}}, "[files]"},
		{[]string{"files", "github"}, NamespacePatch{Disable: []string{"github"}}, "[files]"},
		{[]string{"files"}, NamespacePatch{Disable: []string{"absent"}}, "[files]"},
		{[]string{"b"}, NamespacePatch{Enable: []string{"a"}}, "[a b]"},
	}
	for _, tc := range cases {
		once := tc.patch.Apply(tc.start)
		twice := tc.patch.Apply(once)
		if fmt.Sprint(once) != tc.want || fmt.Sprint(twice) != tc.want {
			t.Errorf("%v + %+v = %v then %v, want %s", tc.start, tc.patch, once, twice, tc.want)
		}
	}
	if err := (NamespacePatch{Enable: []string{"x"}, Disable: []string{"x"}}).Validate(); err == nil {
		t.Error("contradictory patch accepted")
	}
}

func TestFileNamespacesConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ns", "settings.json")
	ctx := context.Background()
	const writers = 16
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A store per writer: each takes the lock through its own file handle,
			// as two processes would.
			store := NewFileNamespaces(path)
			if _, err := store.Patch(ctx, NamespacePatch{Enable: []string{fmt.Sprintf("ns%02d", i)}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := NewFileNamespaces(path).Enabled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers {
		t.Fatalf("%d namespaces enabled after %d concurrent patches: %v (a write was lost)", len(got), writers, got)
	}
	got, _ = NewFileNamespaces(path).Patch(ctx, NamespacePatch{Disable: []string{"ns00"}})
	if len(got) != writers-1 {
		t.Fatalf("after disable: %v", got)
	}
	if _, err := NewFileNamespaces(path).Patch(ctx, NamespacePatch{Enable: []string{""}}); err == nil {
		t.Fatal("empty namespace name accepted")
	}
}

func TestDecodeGrants(t *testing.T) {
	good := `{"id":"g","namespaceId":"w","subject":"agent:a","issuer":"host","issuedAt":"2026-01-01T00:00:00Z","constraints":{},
		"capabilities":[{"resource":{"namespace":"files","path":["Work"]},"actions":["read"],"scope":"descendants"}]}`
	cases := []struct {
		name, doc, wantErr string
	}{
		{"ok", `{"grants":[` + good + `]}`, ""},
		{"unknown field", `{"grants":[{"id":"g","extra":1}]}`, "unknown field"},
		{"bad subject", `{"grants":[` + strings.Replace(good, "agent:a", "agent", 1) + `]}`, "grants[0].subject"},
		{"bad scope", `{"grants":[` + strings.Replace(good, "descendants", "all", 1) + `]}`, "capabilities[0].scope"},
		{"bad segment", `{"grants":[` + strings.Replace(good, `["Work"]`, `[".."]`, 1) + `]}`, "resource.path"},
		{"no actions", `{"grants":[` + strings.Replace(good, `["read"]`, `[]`, 1) + `]}`, "actions"},
		{"zero uses", `{"grants":[` + strings.Replace(good, `"constraints":{}`, `"constraints":{"maxUses":0}`, 1) + `]}`, "maxUses"},
		{"duplicate ids", `{"grants":[` + good + `,` + good + `]}`, "grants[1].id"},
		{"missing issuedAt", `{"grants":[` + strings.Replace(good, `"issuedAt":"2026-01-01T00:00:00Z",`, ``, 1) + `]}`, "issuedAt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeGrants([]byte(tc.doc))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}
