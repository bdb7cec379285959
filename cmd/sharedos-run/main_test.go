package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-run/internal/vectors"
	"github.com/sharedos/sharedos-run/sandbox"
)

func TestMain(m *testing.M) {
	// exec re-executes this test binary as the sandbox stub.
	if len(os.Args) > 1 && os.Args[1] == sandbox.StubArg {
		os.Exit(sandbox.RunStub())
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"sharedos-run"}, args...), strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func filesCatalogueHash(t *testing.T) string {
	t.Helper()
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Catalogues {
		if c.Name == "files (all twelve)" {
			return c.CatalogHash
		}
	}
	t.Fatal("vectors lack the files catalogue")
	return ""
}

func TestCatalogDefault(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	r := runCLI(t, "", "catalog", "--workspace", ws, "--json", "--execution-id", "exec-test")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var cat struct {
		Version     string `json:"version"`
		ExecutionID string `json:"executionId"`
		CatalogHash string `json:"catalogHash"`
		Tools       []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(cat.Tools) != 12 || cat.CatalogHash != filesCatalogueHash(t) || cat.Version != "1" || cat.ExecutionID != "exec-test" {
		t.Fatalf("catalogue: %d tools, hash %s, version %s, id %s", len(cat.Tools), cat.CatalogHash, cat.Version, cat.ExecutionID)
	}

	// Read-only shows only the read tools, so the hash changes.
	r = runCLI(t, "", "catalog", "--workspace", ws, "--read-only", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &cat); err != nil || r.code != 0 {
		t.Fatalf("exit %d %v: %s", r.code, err, r.stderr)
	}
	var names []string
	for _, tool := range cat.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, " ") != "files.grep files.list files.read files.search files.snapshot.list files.stat" {
		t.Fatalf("read-only tools: %v", names)
	}

	r = runCLI(t, "", "catalog", "--workspace", ws)
	if r.code != 0 || !strings.Contains(r.stdout, filesCatalogueHash(t)) || !strings.Contains(r.stdout, "files.snapshot.restore") {
		t.Fatalf("table output (exit %d): %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestCatalogWithConfig(t *testing.T) {
	r := runCLI(t, "", "catalog", "--config", filepath.Join("..", "..", "testdata", "example", "config.yaml"), "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// The example grants reads everywhere and create/replace/append under docs.
	for _, want := range []string{"files.read", "files.create", "files.append", "files.replace"} {
		if !strings.Contains(r.stdout, `"`+want+`"`) {
			t.Errorf("missing %s", want)
		}
	}
	for _, absent := range []string{"files.delete", "files.snapshot.create", "files.snapshot.restore"} {
		if strings.Contains(r.stdout, `"`+absent+`"`) {
			t.Errorf("%s shown without a grant", absent)
		}
	}
}

func TestCanonical(t *testing.T) {
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Canonical {
		r := runCLI(t, c.InputJSON, "canonical")
		if r.code != 0 || r.stdout != c.Canonical+"\n" {
			t.Errorf("%s: exit %d %q %s", c.Name, r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, c.InputJSON, "canonical", "--hash")
		if r.stdout != c.SHA256+"\n" {
			t.Errorf("%s: hash %q", c.Name, r.stdout)
		}
	}
	if r := runCLI(t, "{bad", "canonical"); r.code != 1 || r.stdout != "" || r.stderr == "" {
		t.Errorf("bad input: %+v", r)
	}
}

func TestTokenCommands(t *testing.T) {
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	tv := v.Tokens[0]
	t.Setenv("TOKEN_SECRET", tv.Secret)
	r := runCLI(t, string(tv.Claims), "token", "mint", "--secret-env", "TOKEN_SECRET")
	if r.code != 0 || r.stdout != tv.Token+"\n" {
		t.Fatalf("mint: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "token", "verify", "--secret-env", "TOKEN_SECRET", "--now", "2026-08-23T00:00:00Z", "--expect", "executionId=exec-1", tv.Token)
	if r.code != 0 || !strings.Contains(r.stdout, `"valid": true`) || !strings.Contains(r.stdout, `"executionId": "exec-1"`) {
		t.Fatalf("verify: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "token", "verify", "--secret-env", "TOKEN_SECRET", "--now", "2026-08-23T01:00:00Z", tv.Token)
	if r.code != 1 || !strings.Contains(r.stdout, `"reason": "expired"`) {
		t.Fatalf("expired: exit %d %s", r.code, r.stdout)
	}
	r = runCLI(t, "", "token", "verify", "--secret-env", "TOKEN_SECRET", "--now", "2026-08-23T00:00:00Z", "--expect", "catalogHash="+strings.Repeat("b", 64), tv.Token)
	if r.code != 1 || !strings.Contains(r.stdout, `"reason": "claims_mismatch"`) {
		t.Fatalf("mismatch: exit %d %s", r.code, r.stdout)
	}
	usage := [][]string{
		{"token", "verify", "--secret-env", "TOKEN_SECRET", "--expect", "role=admin", tv.Token},
		{"token", "verify", "--secret-env", "TOKEN_SECRET", "--now", "yesterday", tv.Token},
		{"token", "verify", "--secret-env", "TOKEN_SECRET"},
		{"token", "mint"},
		{"token", "mint", "--secret", "x"},
	}
	for _, args := range usage {
		if r := runCLI(t, "", args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "", "token", "verify", "--secret-env", "NO_SUCH_VARIABLE_SET", tv.Token); r.code != 1 || !strings.Contains(r.stderr, "NO_SUCH_VARIABLE_SET") {
		t.Errorf("missing secret: %+v", r)
	}
	if r := runCLI(t, `{"executionId":"e"}`, "token", "mint", "--secret-env", "TOKEN_SECRET"); r.code != 1 || r.stdout != "" {
		t.Errorf("incomplete claims minted: %+v", r)
	}
}

func TestPolicyCheck(t *testing.T) {
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, pv := range v.Policies {
		path := filepath.Join(dir, "p.json")
		os.WriteFile(path, pv.Policy, 0o644)
		r := runCLI(t, "", "policy", "check", path)
		if r.code != 0 || !strings.Contains(r.stdout, pv.PolicyHash) {
			t.Errorf("policy %d: exit %d %s %s", i, r.code, r.stdout, r.stderr)
		}
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("mode: strict\nexternalDirect: [github]\n"), 0o644)
	if r := runCLI(t, "", "policy", "check", bad); r.code != 1 || !strings.Contains(r.stderr, "cannot declare externally connected tools") {
		t.Errorf("bad policy: %+v", r)
	}
	r := runCLI(t, "", "policy", "check", filepath.Join("..", "..", "testdata", "example", "config.yaml"))
	if r.code != 0 || !strings.Contains(r.stdout, "run configuration") {
		t.Errorf("config: %+v", r)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{"frobnicate"},
		{"catalog", "--no-such-flag"},
		{"catalog", "extra-arg"},
		{"policy", "check"},
		{"version", "x"},
		{"canonical", "--hash=maybe"},
	}
	for _, args := range cases {
		r := runCLI(t, "", args...)
		if r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := runCLI(t, "", "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "sharedos-run ") {
		t.Errorf("version: %+v", r)
	}
	for _, args := range [][]string{{"--help"}, {"catalog", "--help"}, {"token", "verify", "--help"}} {
		if r := runCLI(t, "", args...); r.code != 0 || r.stdout == "" {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
}

func TestMCPServeStdio(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello stdio\n"), 0o644)
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["README.md"]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.replace","arguments":{"path":["README.md"],"content":"x"}}}`,
	}, "\n") + "\n"
	r := runCLI(t, input, "mcp", "serve", "--stdio", "--workspace", ws, "--read-only")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	byID := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout carries a non-protocol line %q", line)
		}
		if id, ok := m["id"].(float64); ok {
			byID[id] = m
		}
	}
	list := byID[2]["result"].(map[string]any)
	if n := len(list["tools"].([]any)); n != 6 {
		t.Fatalf("read-only catalogue over stdio has %d tools", n)
	}
	read := byID[3]["result"].(map[string]any)
	if read["isError"] != false || !strings.Contains(read["content"].([]any)[0].(map[string]any)["text"].(string), "hello stdio") {
		t.Fatalf("read over stdio: %v", read)
	}
	replace := byID[4]["result"].(map[string]any)
	if replace["isError"] != true || replace["_meta"].(map[string]any)["sharedos/code"] != "tool_unavailable" {
		t.Fatalf("replace under --read-only: %v", replace)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(got) != "hello stdio\n" {
		t.Fatalf("workspace changed: %q", got)
	}
	if r := runCLI(t, "", "mcp", "serve"); r.code != 2 {
		t.Fatalf("without --stdio: exit %d", r.code)
	}
}
