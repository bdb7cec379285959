package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/conformance"
	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/launcher"
)

// needHarnesses skips unless root with the pinned harnesses of this checkout.
func needHarnesses(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("conformance cells run in the sandbox; these tests run as root (CI is root)")
	}
	prefix, _ := filepath.Abs(filepath.Join("..", "..", ".harnesses"))
	for _, id := range []string{"claude-code", "codex", "pi"} {
		spec, _ := harnessspec.ByID(id)
		if _, err := launcher.Probe(context.Background(), spec, []string{prefix}); err != nil {
			t.Skipf("%v (.ci/run installs the pinned harnesses)", err)
		}
	}
	t.Setenv("SHAREDOS_HARNESS_PREFIX", prefix)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	return prefix
}

func loadArtifact(t *testing.T, dir string) *conformance.Artifact {
	t.Helper()
	a, err := readArtifact(filepath.Join(dir, artifactName))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// normalized drops what may differ between runs of the same cells: timings, the
// shard marker, and the dsh search path (it names the test binary's directory).
func normalized(a *conformance.Artifact) *conformance.Artifact {
	b, _ := json.Marshal(a)
	var c conformance.Artifact
	json.Unmarshal(b, &c)
	c.ElapsedMs, c.Shard = 0, nil
	for i := range c.Availability {
		c.Availability[i].Reason = ""
	}
	for i := range c.Rows {
		for j := range c.Rows[i].Cells {
			if strings.HasPrefix(c.Rows[i].Cells[j].Detail, "not available") {
				c.Rows[i].Cells[j].Detail = "not available"
			}
		}
	}
	return &c
}

// TestConformanceFullShardedAndMerged: the whole case set with the scripted model
// passes every case on Claude Code, Codex and Pi (both MCP modes), DeepSeek is not
// available with its reason; then the same set as three shards, merged, equals the
// unsharded artifact up to timings.
func TestConformanceFullShardedAndMerged(t *testing.T) {
	needHarnesses(t)
	cases := filepath.Join("..", "..", "testdata", "conformance", "cases")
	full := t.TempDir()
	r := runCLI(t, "", "conformance", "--full", "--jobs", "2", "--cases", cases, "--out", full)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	a := loadArtifact(t, full)
	if len(a.Rows) != len(a.CasesDeclared) || len(a.CasesDeclared) < 13 {
		t.Fatalf("ran %d of %d cases", len(a.Rows), len(a.CasesDeclared))
	}
	for _, row := range a.Rows {
		for _, cell := range row.Cells {
			switch cell.ColumnID {
			case "deepseek":
				if cell.Status != conformance.StatusNotExercised || !strings.Contains(cell.Detail, "not available") {
					t.Errorf("%s/deepseek: %s %s", row.CaseID, cell.Status, cell.Detail)
				}
			default:
				if cell.Status != conformance.StatusPass {
					t.Errorf("%s/%s: %s %s", row.CaseID, cell.ColumnID, cell.Status, cell.Detail)
				}
			}
		}
	}
	for _, av := range a.Availability {
		if av.ColumnID == "deepseek" && (av.Available || !strings.Contains(av.Reason, "dsh")) {
			t.Errorf("deepseek availability: %+v", av)
		}
	}
	if !strings.Contains(r.stdout, "read-to-mutation") || !strings.Contains(r.stderr, "[1/") {
		t.Errorf("no table or progress:\n%s\n%s", r.stdout, r.stderr)
	}

	var shardDirs []string
	for _, s := range []string{"1/3", "2/3", "3/3"} {
		dir := t.TempDir()
		r := runCLI(t, "", "conformance", "--full", "--jobs", "2", "--cases", cases, "--shard", s, "--out", dir)
		if r.code != 0 {
			t.Fatalf("shard %s: exit %d\n%s", s, r.code, r.stderr)
		}
		shardDirs = append(shardDirs, dir)
	}
	merged := t.TempDir()
	r = runCLI(t, "", append([]string{"conformance", "merge", "--out", merged}, shardDirs...)...)
	if r.code != 0 {
		t.Fatalf("merge: exit %d\n%s", r.code, r.stderr)
	}
	m := loadArtifact(t, merged)
	if got, want := normalized(m), normalized(a); !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("merged shards differ from the unsharded run:\nmerged: %s\nunsharded: %s", g, w)
	}
	// A shard of another case set is refused.
	other := loadArtifact(t, shardDirs[0])
	other.CaseSetHash = strings.Repeat("0", 64)
	otherDir := t.TempDir()
	if err := writeJSONFile(filepath.Join(otherDir, artifactName), other); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "conformance", "merge", "--out", t.TempDir(), otherDir, shardDirs[1], shardDirs[2]); r.code == 0 || !strings.Contains(r.stderr, "case set") {
		t.Fatalf("merged a shard of another case set: %d %s", r.code, r.stderr)
	}
}

// TestConformanceComparabilityWarnings: two columns given different models, and a
// case whose catalogue differs between them (the host denies one tool to one column),
// are flagged on stderr and in the artifact.
func TestConformanceComparabilityWarnings(t *testing.T) {
	needHarnesses(t)
	cfg := filepath.Join(t.TempDir(), "conformance.json")
	os.WriteFile(cfg, []byte(`{"harnesses":{"codex":{"model":{"id":"scripted-a","provider":"scripted"},"hostDeny":["files.create"]},"pi/native":{"model":{"id":"scripted-b","provider":"scripted"}}}}`), 0o644)
	out := t.TempDir()
	r := runCLI(t, "", "conformance", "--case", "read-to-mutation", "--harness", "codex,pi/native", "--config", cfg,
		"--cases", filepath.Join("..", "..", "testdata", "conformance", "cases"), "--out", out)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"warning: columns were given different models", "warning: case read-to-mutation: columns were given different catalogues"} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("no %q on stderr:\n%s", want, r.stderr)
		}
	}
	a := loadArtifact(t, out)
	if w := strings.Join(a.Warnings, " "); !strings.Contains(w, "different models") || !strings.Contains(w, "different catalogues") {
		t.Fatalf("warnings not recorded: %v", a.Warnings)
	}
}

func TestConformanceUsage(t *testing.T) {
	cases := filepath.Join("..", "..", "testdata", "conformance", "cases")
	for _, args := range [][]string{
		{"conformance", "--cases", cases, "--case", "no-such-case"},
		{"conformance", "--cases", cases, "--harness", "no-such-harness"},
		{"conformance", "--cases", cases, "--shard", "4/3"},
		{"conformance", "--cases", cases, "--jobs", "0"},
		{"conformance", "merge"},
	} {
		if r := runCLI(t, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, r.code, exitUsage, r.stderr)
		}
	}
	// --limit 0 probes the harnesses and runs nothing.
	t.Setenv("SHAREDOS_HARNESS_PREFIX", t.TempDir())
	out := t.TempDir()
	r := runCLI(t, "", "conformance", "--cases", cases, "--limit", "0", "--out", out)
	if r.code != 0 || !strings.Contains(r.stdout, "no cases run") {
		t.Fatalf("--limit 0: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
}
