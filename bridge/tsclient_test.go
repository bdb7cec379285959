package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

// TestTypeScriptSDKClientInterop drives the bridge with the official MCP
// TypeScript SDK (pinned; scripts/install-mcp-sdk.sh installs it).
func TestTypeScriptSDKClientInterop(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed; .ci/run installs Node and the SDK")
	}
	prefix, _ := filepath.Abs(filepath.Join("..", ".deps", "mcp-ts-client"))
	if _, err := os.Stat(filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("the MCP TypeScript SDK is not installed: run scripts/install-mcp-sdk.sh")
	}
	f := newFixture(t, Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("..", "testdata", "mcp-ts-client", "client.mjs"), prefix, f.url)
	cmd.Env = append(os.Environ(), "SHAREDOS_MCP_TOKEN="+f.token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("client output %q: %v", sc.Text(), err)
		}
		steps[m["step"].(string)] = m
	}
	if s := steps["connected"]; s["server"].(map[string]any)["name"] != "sharedos" {
		t.Fatalf("connected: %v", s)
	}
	list := steps["list"]
	if list["meta"].(map[string]any)[MetaCatalogHash] != f.catalog.CatalogHash {
		t.Fatalf("list _meta: %v", list["meta"])
	}
	if n := len(list["names"].([]any)); n != len(f.catalog.Tools) {
		t.Fatalf("listed %d tools", n)
	}
	if s := steps["allowed"]; s["isError"] != false || !strings.Contains(s["text"].(string), "# hello") {
		t.Fatalf("allowed: %v", s)
	}
	if s := steps["denied"]; s["isError"] != true || s["meta"].(map[string]any)[MetaCode] != kernel.CodeNoMatchingGrant || s["meta"].(map[string]any)[MetaStatus] != "denied" {
		t.Fatalf("denied: %v", s)
	}
	if s := steps["unknown"]; s["isError"] != true || s["meta"].(map[string]any)[MetaCode] != kernel.CodeToolUnavailable {
		t.Fatalf("unknown: %v", s)
	}
	if s := steps["cancelled"]; s["aborted"] != true {
		t.Fatalf("cancelled: %v", s)
	}
	select {
	case <-f.testTools.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the kernel call was not cancelled by the client's abort")
	}
	if s := steps["after-cancel"]; s["isError"] != false {
		t.Fatalf("after cancel: %v", s)
	}
}
