package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-run/kernel"
)

func connectGoSDK(t *testing.T, f *fixture) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-interop", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: f.httpClient()}, nil)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// refusalOf decodes an isError result's text body and _meta.
func refusalOf(t *testing.T, res *mcp.CallToolResult) (refusal, map[string]any) {
	t.Helper()
	if !res.IsError || len(res.Content) != 1 {
		t.Fatalf("not a refusal: %+v", res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	var r refusal
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("refusal text %q: %v", text, err)
	}
	return r, res.Meta
}

func TestGoSDKClientInterop(t *testing.T) {
	f := newFixture(t, Limits{})
	cs := connectGoSDK(t, f)
	ctx := context.Background()

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := list.Meta[MetaCatalogHash]; got != f.catalog.CatalogHash {
		t.Fatalf("tools/list _meta catalogHash %v, want %s", got, f.catalog.CatalogHash)
	}
	if got := list.Meta[MetaExecutionID]; got != "exec-test-1" {
		t.Fatalf("tools/list _meta executionId %v", got)
	}
	if len(list.Tools) != len(f.catalog.Tools) {
		t.Fatalf("%d tools listed, catalogue has %d", len(list.Tools), len(f.catalog.Tools))
	}
	for _, tool := range list.Tools {
		if tool.Meta[MetaNamespace] == nil || tool.Meta[MetaSource] != "sharedos" {
			t.Errorf("tool %s _meta %v", tool.Name, tool.Meta)
		}
	}

	// Allowed.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"README.md"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "# hello") {
		t.Fatalf("allowed call: %+v", res)
	}

	// Denied in band: writing outside docs/.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.replace", Arguments: map[string]any{"path": []string{"README.md"}, "content": "pwned"}})
	if err != nil {
		t.Fatal(err)
	}
	r, meta := refusalOf(t, res)
	if r.Status != kernel.Denied || r.Code != kernel.CodeNoMatchingGrant || meta[MetaStatus] != "denied" || meta[MetaCode] != kernel.CodeNoMatchingGrant {
		t.Fatalf("denied call: %+v %v", r, meta)
	}

	// Unknown tool: in band, not a JSON-RPC error.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "shell.exec", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("unknown tool answered with a protocol error: %v", err)
	}
	if r, _ := refusalOf(t, res); r.Code != kernel.CodeToolUnavailable {
		t.Fatalf("unknown tool: %+v", r)
	}

	// Portable name maps back, and the alias is recorded.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files_stat", Arguments: map[string]any{"path": []string{"docs"}}})
	if err != nil || res.IsError {
		t.Fatalf("portable name: %v %+v", err, res)
	}

	// Cancelled: the client gives up; the kernel's context is cancelled.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "test.block", Arguments: map[string]any{}})
		done <- err
	}()
	<-f.testTools.entered
	cancel()
	select {
	case <-f.testTools.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the kernel call was not cancelled")
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call returned %v", err)
	}

	// The session is still usable.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.list", Arguments: map[string]any{"path": []string{}}}); err != nil {
		t.Fatal(err)
	}

	waitFor(t, func() bool { return countDecision(f.server.Events(), DecisionCancelled) == 1 })
	ev := f.server.Events()
	var calls []Event
	for _, e := range ev {
		if e.Kind == EventCall {
			calls = append(calls, e)
		}
	}
	want := []struct{ tool, alias, decision, code string }{
		{"files.read", "", "succeeded", ""},
		{"files.replace", "", "denied", kernel.CodeNoMatchingGrant},
		{"shell.exec", "", "denied", kernel.CodeToolUnavailable},
		{"files.stat", "files_stat", "succeeded", ""},
		{"test.block", "", DecisionCancelled, ""},
		{"files.list", "", "succeeded", ""},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d call events: %+v", len(calls), calls)
	}
	for i, w := range want {
		c := calls[i]
		if c.Tool != w.tool || c.Alias != w.alias || c.Decision != w.decision || c.Code != w.code || c.CallID == "" {
			t.Errorf("event %d: %+v, want %+v", i, c, w)
		}
	}
	if got := calls[0].Resource; len(got) != 1 || got[0] != "README.md" || calls[0].ArgumentsSHA256 == "" {
		t.Errorf("resource/digest of the first call: %+v", calls[0])
	}
	if !f.server.Initialized() || !f.server.Listed() {
		t.Error("initialize/list not observed")
	}
	if ev[0].Kind != EventInitialize || ev[0].Client != "go-sdk-interop/1" || ev[0].ProtocolVersion == "" {
		t.Errorf("initialize event %+v", ev[0])
	}
}

func countDecision(events []Event, decision string) int {
	n := 0
	for _, e := range events {
		if e.Kind == EventCall && e.Decision == decision {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
