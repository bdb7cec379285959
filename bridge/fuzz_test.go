package bridge

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzHandler feeds arbitrary bodies and headers to the bridge's HTTP handler: it
// must never panic and never answer 500.
func FuzzHandler(f *testing.F) {
	fx := newFixture(f, Limits{RequestsPerSecond: 1e9, Burst: 1 << 30})
	handler := fx.server.Handler()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"0"}}}`
	// A real session, so that fuzzed requests can reach tools/list and tools/call.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", bytes.NewBufferString(init))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+fx.token)
	handler.ServeHTTP(rec, req)
	session := rec.Header().Get("Mcp-Session-Id")

	f.Add("POST", []byte(init), "", "", "application/json", true)
	f.Add("POST", []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), session, "2025-11-25", "application/json", true)
	f.Add("POST", []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["README.md"]}}}`), session, "2025-11-25", "application/json", true)
	f.Add("POST", []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files_grep","arguments":{"path":[],"pattern":"(","mode":"regex"}}}`), session, "2025-06-18", "application/json", true)
	f.Add("POST", []byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), session, "2025-03-26", "application/json", true)
	f.Add("DELETE", []byte{}, session, "2025-11-25", "", true)
	f.Add("GET", []byte{}, session, "", "", false)
	f.Add("POST", []byte(`{"jsonrpc":"2.0","id":"x","method":"server/discover"}`), "", "2026-07-28", "application/json; charset=utf-8", true)
	f.Fuzz(func(t *testing.T, method string, body []byte, sessionID, protocol, contentType string, withToken bool) {
		req, err := http.NewRequest(method, "http://127.0.0.1/mcp", bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sessionID != "" {
			req.Header.Set("Mcp-Session-Id", sessionID)
		}
		if protocol != "" {
			req.Header.Set("Mcp-Protocol-Version", protocol)
		}
		if withToken {
			req.Header.Set("Authorization", "Bearer "+fx.token)
		}
		req.RemoteAddr = "127.0.0.1:5555"
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			handler.ServeHTTP(rec, req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("handler hung on %s %q", method, body)
		}
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q → %d %s", method, body, rec.Code, rec.Body)
		}
	})
}
