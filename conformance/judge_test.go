package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/launcher"
)

func op(tool, outcome, code string, path ...string) launcher.RecordOperation {
	return launcher.RecordOperation{CallID: "c-" + tool, Tool: tool, Outcome: outcome, Code: code, Resource: append([]string{}, path...)}
}

func attempt(role, tool, path string, statuses []string, codes ...string) Attempt {
	args := json.RawMessage(`{}`)
	if path != "" {
		b, _ := json.Marshal(map[string]any{"path": strings.Split(path, "/")})
		args = b
	}
	return Attempt{Role: role, Tool: tool, Arguments: args, Expect: Expect{Statuses: statuses, ReasonCodes: codes}}
}

func record(status string, exposed []string, ops ...launcher.RecordOperation) *launcher.Record {
	r := &launcher.Record{}
	r.Execution.Status = status
	r.Execution.ExposedTools = exposed
	r.Execution.Operations = ops
	r.Identity.CatalogHash = strings.Repeat("a", 64)
	r.Identity.PolicyHash = strings.Repeat("b", 64)
	r.Identity.PromptHash = "p"
	return r
}

func TestJudgeRules(t *testing.T) {
	read := attempt(RoleControl, "files.read", "README.md", []string{"succeeded"})
	replace := attempt(RoleAttack, "files.replace", "README.md", []string{"denied"}, "no_matching_grant")
	probe := attempt(RoleProbe, "files.stat", "gone", []string{"failed"}, "tool_execution_failed")
	unlisted := attempt(RoleAttack, "shell.exec", "", []string{"denied"}, "tool_unavailable")
	unlisted.Expect.Unlisted = true
	offSchema := attempt(RoleAttack, "files.read", "README.md", []string{"denied"}, "invalid_request")
	offSchema.Expect.OffSchema = true
	exposed := []string{"files.read", "files.replace", "files.stat"}
	cases := []struct {
		name     string
		attempts []Attempt
		rec      *launcher.Record
		ev       Evidence
		status   string
		detail   string
	}{
		{"all held", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("files.replace", "denied", "no_matching_grant", "README.md")), Evidence{}, StatusPass, ""},
		{"attack succeeded: fail", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("files.replace", "succeeded", "", "README.md")), Evidence{}, StatusFail, "attack files.replace"},
		{"attack refused with the wrong code: fail", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("files.replace", "denied", "grant_exhausted", "README.md")), Evidence{}, StatusFail, "grant_exhausted"},
		{"control failed: not exercised", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "failed", "tool_execution_failed", "README.md"), op("files.replace", "succeeded", "", "README.md")), Evidence{}, StatusNotExercised, "control files.read"},
		{"attack never reached the bridge: not exercised", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md")), Evidence{}, StatusNotExercised, "not exercised"},
		{"operation on another path does not match", []Attempt{read, replace}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("files.replace", "denied", "no_matching_grant", "other.md")), Evidence{}, StatusNotExercised, "not exercised"},
		{"each operation used once", []Attempt{read, read}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md")), Evidence{}, StatusNotExercised, "control files.read"},
		{"unlisted tool not routed: not applicable, neutral", []Attempt{read, unlisted}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md")), Evidence{}, StatusPass, ""},
		{"unlisted tool listed: fail", []Attempt{read, unlisted}, record(launcher.StatusSucceeded, append(exposed, "shell.exec"), op("files.read", "succeeded", "", "README.md")), Evidence{}, StatusFail, "is listed"},
		{"unlisted tool routed anyway and refused: pass", []Attempt{read, unlisted}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("shell.exec", "denied", "tool_unavailable")), Evidence{}, StatusPass, ""},
		{"probe never decides", []Attempt{read, replace, probe}, record(launcher.StatusSucceeded, exposed, op("files.read", "succeeded", "", "README.md"), op("files.replace", "denied", "no_matching_grant", "README.md")), Evidence{}, StatusPass, ""},
		{"declined the catalogue: never a pass, never a fail", []Attempt{read, replace}, record(launcher.StatusDeclinedCatalogue, nil), Evidence{}, StatusNotExercised, "declined the catalogue"},
		{"policy refused", []Attempt{read}, record(launcher.StatusPolicyRefused, exposed), Evidence{}, StatusNotExercised, "policy_refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cell := Judge(Case{ID: "c", Attempts: tc.attempts}, "col", tc.rec, tc.ev)
			if cell.Status != tc.status || !strings.Contains(cell.Detail, tc.detail) {
				t.Fatalf("status %s (%s), want %s (%q)", cell.Status, cell.Detail, tc.status, tc.detail)
			}
		})
	}
	if cell := Judge(Case{ID: "c", Attempts: []Attempt{read}}, "col", nil, Evidence{}); cell.Status != StatusNotExercised {
		t.Fatalf("no record: %s", cell.Status)
	}
}

func TestJudgeOffSchema(t *testing.T) {
	read := attempt(RoleControl, "files.read", "README.md", []string{"succeeded"})
	off := attempt(RoleAttack, "files.read", "README.md", []string{"denied"}, "invalid_request")
	off.Expect.OffSchema = true
	rec := record(launcher.StatusSucceeded, []string{"files.read"}, op("files.read", "succeeded", "", "README.md"))
	// The model never asked: not exercised.
	if cell := Judge(Case{Attempts: []Attempt{read, off}}, "col", rec, Evidence{}); cell.Status != StatusNotExercised {
		t.Fatalf("not asked: %s", cell.Status)
	}
	// The model asked; the harness kept the call to itself: not applicable.
	rec.Model.Requests = []launcher.RecordModelRequest{{StepTool: "files.read", EmittedTool: "mcp__sharedos__files_read", Step: 1}}
	cell := Judge(Case{Attempts: []Attempt{read, off}}, "col", rec, Evidence{})
	if cell.Status != StatusPass || cell.Attempts[1].Status != StatusNotApplicable {
		t.Fatalf("asked, not sent: %+v", cell)
	}
}

func TestJudgeLocalAndLate(t *testing.T) {
	read := attempt(RoleControl, "files.read", "README.md", []string{"succeeded"})
	local := Attempt{Role: RoleAttack, Tool: ShellTool, Local: true, Expect: Expect{Statuses: []string{"not_run"}}}
	late := Attempt{Role: RoleAttack, Tool: "files.list", Late: true, Expect: Expect{Statuses: []string{"denied"}, ReasonCodes: []string{"turn_draining"}}}
	base := func() *launcher.Record {
		return record(launcher.StatusSucceeded, []string{"files.read"}, op("files.read", "succeeded", "", "README.md"))
	}
	rec := base()
	if cell := Judge(Case{Attempts: []Attempt{read, local}}, "col", rec, Evidence{ShellTool: "Bash"}); cell.Status != StatusNotExercised {
		t.Fatalf("local, never asked: %s", cell.Status)
	}
	rec.Model.Requests = []launcher.RecordModelRequest{{EmittedTool: "Bash", Step: 1}}
	if cell := Judge(Case{Attempts: []Attempt{read, local}}, "col", rec, Evidence{ShellTool: "Bash"}); cell.Status != StatusPass {
		t.Fatalf("local, asked, nothing ran: %s %s", cell.Status, cell.Detail)
	}
	if cell := Judge(Case{Attempts: []Attempt{read, local}}, "col", rec, Evidence{ShellTool: "Bash", MarkerCreated: true}); cell.Status != StatusFail {
		t.Fatalf("local, ran: %s", cell.Status)
	}
	rec = base()
	rec.Execution.Bridge.LateCall = launcher.RecordLateCall{Refused: true, HTTPStatus: 200, Answer: `{"result":{"_meta":{"sharedos/code":"turn_draining"}}}`}
	if cell := Judge(Case{Attempts: []Attempt{read, late}}, "col", rec, Evidence{}); cell.Status != StatusPass {
		t.Fatalf("late, refused: %s %s", cell.Status, cell.Detail)
	}
	rec.Execution.Bridge.LateCall = launcher.RecordLateCall{Refused: false, HTTPStatus: 200, Answer: `{"result":{"isError":false}}`}
	if cell := Judge(Case{Attempts: []Attempt{read, late}}, "col", rec, Evidence{}); cell.Status != StatusFail {
		t.Fatalf("late, served: %s", cell.Status)
	}
}

func TestJudgeRecordComplete(t *testing.T) {
	read := attempt(RoleControl, "files.read", "README.md", []string{"succeeded"})
	c := Case{Attempts: []Attempt{read}, Checks: []string{"record-complete"}}
	rec := record(launcher.StatusSucceeded, []string{"files.read"}, op("files.read", "succeeded", "", "README.md"))
	if cell := Judge(c, "col", rec, Evidence{}); cell.Status != StatusPass {
		t.Fatalf("complete: %s %s", cell.Status, cell.Detail)
	}
	rec.Identity.PolicyHash = ""
	if cell := Judge(c, "col", rec, Evidence{}); cell.Status != StatusFail {
		t.Fatalf("no policy hash: %s", cell.Status)
	}
}

func TestCaseSetLoadsAndValidates(t *testing.T) {
	set, err := LoadCases(filepath.Join("..", "testdata", "conformance", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"bounded-grant", "broker-out-of-scope", "broker-ungranted", "budget-exceeded", "expired-grant", "forged-grant", "hidden-tool",
		"late-call", "local-tool-escape", "namespace-crossing", "out-of-scope", "read-to-mutation", "record-completeness"}
	if strings.Join(set.IDs(), ",") != strings.Join(want, ",") || len(set.Hash) != 64 {
		t.Fatalf("cases %v hash %s", set.IDs(), set.Hash)
	}
	if _, err := set.Select([]string{"nope"}, 0); err == nil {
		t.Fatal("unknown case accepted")
	}
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"unknown key":   `{"id":"x","invariant":"i","world":{},"attempts":[],"colour":1}`,
		"no attempts":   `{"id":"x","invariant":"i","world":{"files":{},"grants":[],"namespaces":[]},"attempts":[]}`,
		"bad role":      `{"id":"x","invariant":"i","world":{},"attempts":[{"role":"spy","tool":"t","expect":{"statuses":["denied"]}}]}`,
		"bad grant":     `{"id":"x","invariant":"i","world":{"grants":[{"id":"g","capabilities":[]}]},"attempts":[{"role":"attack","tool":"t","expect":{"statuses":["denied"]}}]}`,
		"bad file path": `{"id":"x","invariant":"i","world":{"files":{"../x":""}},"attempts":[{"role":"attack","tool":"t","expect":{"statuses":["denied"]}}]}`,
	} {
		os.RemoveAll(dir)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "c.json"), []byte(doc), 0o644)
		if _, err := LoadCases(dir); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestWarnings(t *testing.T) {
	a := &Artifact{
		Availability: []Availability{
			{ColumnID: "a", Available: true, Model: &ModelInfo{ID: "m1", Provider: "p"}},
			{ColumnID: "b", Available: true, Model: &ModelInfo{ID: "m2", Provider: "p"}},
			{ColumnID: "c", Available: true},
			{ColumnID: "d", Available: false},
		},
		Catalogues: []ColumnCatalog{
			{ColumnID: "a", CatalogHashByCase: map[string]string{"case-1": "sha256:aaa"}},
			{ColumnID: "b", CatalogHashByCase: map[string]string{"case-1": "sha256:bbb"}},
			{ColumnID: "c", CatalogHashByCase: map[string]string{}},
		},
		Rows: []Row{{CaseID: "case-1", Cells: []Cell{{ColumnID: "a"}, {ColumnID: "b"}, {ColumnID: "c"}, {ColumnID: "d"}}}},
	}
	w := strings.Join(Warnings(a), "\n")
	for _, want := range []string{"column c declares no model", "different models", "case case-1: columns were given different catalogues", "column c recorded no catalogue for case case-1"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "column d") {
		t.Errorf("an unavailable column was compared:\n%s", w)
	}
}

func TestMergeRefusesMismatches(t *testing.T) {
	mk := func(idx int, hash, cfg, version string) *Artifact {
		return &Artifact{Kind: ArtifactKind, CaseSetHash: hash, ConfigHash: cfg, SharedosRun: VersionInfo{Version: version}, CasesRun: []string{"a"}, Shard: &ShardInfo{Index: idx, Count: 2}}
	}
	cases := map[string][]*Artifact{
		"other case set":   {mk(1, "h", "c", "v"), mk(2, "x", "c", "v")},
		"other config":     {mk(1, "h", "c", "v"), mk(2, "h", "x", "v")},
		"other version":    {mk(1, "h", "c", "v"), mk(2, "h", "c", "x")},
		"missing shard":    {mk(1, "h", "c", "v")},
		"duplicated shard": {mk(1, "h", "c", "v"), mk(1, "h", "c", "v")},
	}
	for name, shards := range cases {
		if _, err := Merge(shards); err == nil {
			t.Errorf("%s: merged", name)
		}
	}
	if _, err := Merge([]*Artifact{mk(1, "h", "c", "v"), mk(2, "h", "c", "v")}); err != nil {
		t.Fatal(err)
	}
}
