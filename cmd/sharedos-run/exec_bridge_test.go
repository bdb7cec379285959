package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mcpCurl is a shell client of the bridge made of curl alone: what an agent of one's
// own, inside the sandbox, would do with $SHAREDOS_MCP_URL and $SHAREDOS_MCP_TOKEN.
const mcpCurl = `set -u
post() { curl -sS -H "Authorization: Bearer $SHAREDOS_MCP_TOKEN" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' ${SID:+-H "Mcp-Session-Id: $SID"} "$@" "$SHAREDOS_MCP_URL"; }
SID=$(post -D - -o /dev/null --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}' \
  | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
post --data '{"jsonrpc":"2.0","method":"notifications/initialized"}'
echo "LIST $(post --data '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')"
echo "READ $(post --data '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["README.md"]}}}')"
echo "REPLACE $(post --data '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.replace","arguments":{"path":["README.md"],"content":"pwned"}}}')"
test -r "$WS/README.md" && echo "WORKSPACE VISIBLE"
echo pwned > "$WS/README.md" 2>/dev/null && echo "DIRECT WRITE WORKED" || echo "DIRECT WRITE REFUSED"
curl -sS -m 2 -o /dev/null http://example.com/ 2>/dev/null && echo "EGRESS WORKED" || echo "EGRESS REFUSED"
`

func TestExecServesTheBridge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("exec runs the sandbox; this test runs as root (CI is root)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (.ci/run installs it)")
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	// Not under /tmp (nor HOME), which the sandbox hides — wherever the checkout is:
	// the workspace must be visible inside so that the direct write is refused by the
	// read-only root, not by absence.
	ws, err := os.MkdirTemp("/var/tmp", "sharedos-exec-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("hello from the workspace\n"), 0o644)
	outcome := filepath.Join(t.TempDir(), "outcome.json")
	r := runCLI(t, "", "exec", "--workspace", ws, "--read-only", "--outcome", outcome, "--env", "WS="+ws, "--", "sh", "-c", mcpCurl)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			lines[k] = v
		}
	}
	if !strings.Contains(lines["LIST"], `"sharedos/catalogHash"`) || strings.Contains(lines["LIST"], "files.replace") {
		t.Errorf("tools/list from inside: %s", lines["LIST"])
	}
	if !strings.Contains(lines["READ"], "hello from the workspace") {
		t.Errorf("files.read from inside: %s", lines["READ"])
	}
	if !strings.Contains(lines["REPLACE"], `"sharedos/code":"tool_unavailable"`) {
		t.Errorf("files.replace under --read-only: %s", lines["REPLACE"])
	}
	if !strings.Contains(r.stdout, "WORKSPACE VISIBLE") || !strings.Contains(r.stdout, "DIRECT WRITE REFUSED") || !strings.Contains(r.stdout, "EGRESS REFUSED") {
		t.Errorf("the command acted outside the bridge:\n%s", r.stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "README.md")); string(got) != "hello from the workspace\n" {
		t.Fatalf("workspace changed: %q", got)
	}
	var data []byte
	var out struct {
		ExitCode int `json:"exitCode"`
		Bridge   struct {
			CatalogHash string `json:"catalogHash"`
			Initialized bool   `json:"initialized"`
			Listed      bool   `json:"listed"`
			Events      []struct {
				Kind, Tool, Decision, Code string
			} `json:"events"`
		} `json:"bridge"`
	}
	data, err = os.ReadFile(outcome)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Bridge.Initialized || !out.Bridge.Listed || out.Bridge.CatalogHash == "" {
		t.Fatalf("bridge in the outcome: %+v", out.Bridge)
	}
	var calls []string
	for _, e := range out.Bridge.Events {
		if e.Kind == "call" {
			calls = append(calls, e.Tool+":"+e.Decision+":"+e.Code)
		}
	}
	if strings.Join(calls, " ") != "files.read:succeeded: files.replace:denied:tool_unavailable" {
		t.Fatalf("recorded calls: %v", calls)
	}
}
