package bridge

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

// rawClient speaks MCP over plain HTTP, to reach the edges a real SDK never does.
type rawClient struct {
	t       *testing.T
	f       *fixture
	hc      *http.Client
	session string
	version string
}

type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

func (r rawResponse) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not JSON: %q", r.status, r.body)
	}
	return m
}

func newRaw(t *testing.T, f *fixture) *rawClient {
	return &rawClient{t: t, f: f, hc: &http.Client{Timeout: 10 * time.Second}}
}

func (c *rawClient) do(method string, body string, headers map[string]string) rawResponse {
	c.t.Helper()
	req, err := http.NewRequest(method, c.f.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.f.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return rawResponse{resp.StatusCode, resp.Header, data}
}

func (c *rawClient) initialize(version string) rawResponse {
	c.t.Helper()
	r := c.do("POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`, version), nil)
	if r.status != 200 {
		c.t.Fatalf("initialize %s: %d %s", version, r.status, r.body)
	}
	c.session = r.header.Get("Mcp-Session-Id")
	res := r.json(c.t)["result"].(map[string]any)
	c.version = res["protocolVersion"].(string)
	if n := c.do("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); n.status != 202 {
		c.t.Fatalf("initialized notification: %d %s", n.status, n.body)
	}
	return r
}

func (c *rawClient) call(id int, name, args string) map[string]any {
	c.t.Helper()
	r := c.do("POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args), nil)
	if r.status != 200 {
		c.t.Fatalf("tools/call %s: %d %s", name, r.status, r.body)
	}
	m := r.json(c.t)
	res, ok := m["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("tools/call %s: no result: %s", name, r.body)
	}
	return res
}

func TestProtocolVersionsNegotiate(t *testing.T) {
	f := newFixture(t, Limits{})
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		c := newRaw(t, f)
		r := c.initialize(v)
		res := r.json(t)["result"].(map[string]any)
		if res["protocolVersion"] != v {
			t.Errorf("asked %s, negotiated %v", v, res["protocolVersion"])
		}
		info := res["serverInfo"].(map[string]any)
		if info["name"] != "sharedos" {
			t.Errorf("serverInfo %v", info)
		}
		if caps, _ := json.Marshal(res["capabilities"]); string(caps) != `{"tools":{"listChanged":false}}` {
			t.Errorf("capabilities %s", caps)
		}
		list := c.do("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil).json(t)["result"].(map[string]any)
		if list["_meta"].(map[string]any)[MetaCatalogHash] != f.catalog.CatalogHash {
			t.Errorf("%s: list _meta %v", v, list["_meta"])
		}
	}
}

// TestListedToolsHashToTheCatalogue recomputes catalogHash from the wire, as an
// independent client would: the listed tools minus their _meta.
func TestListedToolsHashToTheCatalogue(t *testing.T) {
	f := newFixture(t, Limits{})
	c := newRaw(t, f)
	c.initialize("2025-11-25")
	r := c.do("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
	var body struct {
		Result struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	var tools []json.RawMessage
	for _, tool := range body.Result.Tools {
		delete(tool, "_meta")
		b, _ := json.Marshal(tool)
		tools = append(tools, b)
	}
	all, _ := json.Marshal(tools)
	var published []PublishedTool
	if err := json.Unmarshal(all, &published); err != nil {
		t.Fatal(err)
	}
	h, err := CatalogHash(published)
	if err != nil || h != f.catalog.CatalogHash {
		t.Fatalf("hash of the listed tools %s, catalogue %s (%v)", h, f.catalog.CatalogHash, err)
	}
}

func TestRenderedResults(t *testing.T) {
	f := newFixture(t, Limits{})
	c := newRaw(t, f)
	c.initialize("2025-11-25")
	ok := c.call(2, "files.read", `{"path":["README.md"]}`)
	if ok["isError"] != false || ok["structuredContent"] != nil || ok["_meta"] != nil {
		t.Fatalf("success without output schema: %v", ok)
	}
	typed := c.call(3, "test.typed", `{}`)
	if sc, _ := typed["structuredContent"].(map[string]any); sc["ok"] != true {
		t.Fatalf("structuredContent: %v", typed)
	}
	denied := c.call(4, "files.delete", `{"path":["README.md"]}`)
	text := denied["content"].([]any)[0].(map[string]any)["text"].(string)
	want := `{"status":"denied","code":"tool_unavailable","message":`
	if !strings.HasPrefix(text, want) || denied["isError"] != true {
		t.Fatalf("denied text %q", text)
	}
	meta := denied["_meta"].(map[string]any)
	if meta[MetaStatus] != "denied" || meta[MetaCode] != "tool_unavailable" {
		t.Fatalf("denied _meta %v", meta)
	}
	failed := c.call(5, "files.read", `{"path":"README.md"}`)
	text = failed["content"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.HasPrefix(text, `{"status":"failed","code":"invalid_tool_arguments","message":`) {
		t.Fatalf("failed text %q", text)
	}
}

func TestHTTPEdges(t *testing.T) {
	f := newFixture(t, Limits{})
	otherCat, _ := NewCatalog("exec-other", nil)
	otherSrv, err := New(Options{Catalog: otherCat, Turn: f.turn, Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	otherTurnToken, _ := otherSrv.Token(time.Now().Add(time.Hour))
	expired, _ := f.server.Token(time.Now().Add(-time.Second))
	wrongSecret, _ := MintToken(Claims{ExecutionID: "exec-test-1", NamespaceID: "world-1", Actor: "agent:bob", CatalogHash: f.catalog.CatalogHash, ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, []byte("another-secret-entirely"))
	otherHash, _ := MintToken(Claims{ExecutionID: "exec-test-1", NamespaceID: "world-1", Actor: "agent:bob", CatalogHash: strings.Repeat("0", 64), ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, []byte(testSecret))
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	cases := []struct {
		name    string
		method  string
		body    string
		headers map[string]string
		status  int
		rpcCode float64
	}{
		{name: "no token", method: "POST", body: init, headers: map[string]string{"Authorization": ""}, status: 401},
		{name: "not bearer", method: "POST", body: init, headers: map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, status: 401},
		{name: "garbage token", method: "POST", body: init, headers: map[string]string{"Authorization": "Bearer x.y"}, status: 401},
		{name: "wrong secret", method: "POST", body: init, headers: map[string]string{"Authorization": "Bearer " + wrongSecret}, status: 401},
		{name: "expired", method: "POST", body: init, headers: map[string]string{"Authorization": "Bearer " + expired}, status: 401},
		{name: "other execution", method: "POST", body: init, headers: map[string]string{"Authorization": "Bearer " + otherTurnToken}, status: 401},
		{name: "other catalogue", method: "POST", body: init, headers: map[string]string{"Authorization": "Bearer " + otherHash}, status: 401},
		{name: "right token", method: "POST", body: init, status: 200},
		{name: "GET", method: "GET", status: 405},
		{name: "PUT", method: "PUT", body: init, status: 405},
		{name: "text/plain", method: "POST", body: init, headers: map[string]string{"Content-Type": "text/plain"}, status: 415},
		{name: "no content type", method: "POST", body: init, headers: map[string]string{"Content-Type": ""}, status: 415},
		{name: "malformed JSON", method: "POST", body: `{"jsonrpc":`, status: 400, rpcCode: rpcParseError},
		{name: "not an object", method: "POST", body: `"hello"`, status: 400, rpcCode: rpcParseError},
		{name: "batch", method: "POST", body: "[" + init + "]", status: 400, rpcCode: rpcInvalidRequest},
		{name: "too large", method: "POST", body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, status: 413, rpcCode: rpcInvalidRequest},
		{name: "server/discover probe", method: "POST", body: `{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, headers: map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, status: 200, rpcCode: rpcMethodNotFound},
		{name: "cross-origin browser", method: "POST", body: init, headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, status: 403},
		{name: "rebinding Host", method: "POST", body: init, headers: map[string]string{"Host": "evil.example"}, status: 403},
		// Without a session the SDK refuses the call before the kernel is asked.
		{name: "call before initialize", method: "POST", body: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["README.md"]}}}`, status: 200, rpcCode: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newRaw(t, f)
			headers := tc.headers
			if host, ok := headers["Host"]; ok {
				c.hc.Transport = hostOverride{host}
			}
			r := c.do(tc.method, tc.body, headers)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.rpcCode != 0 || strings.Contains(tc.body, `"tools/call"`) {
				if code := r.json(t)["error"].(map[string]any)["code"]; code != tc.rpcCode {
					t.Fatalf("JSON-RPC code %v, want %v", code, tc.rpcCode)
				}
			}
			if r.status == 401 && (strings.Contains(string(r.body), "files.") || r.header.Get("WWW-Authenticate") == "") {
				t.Fatalf("401 leaks or lacks a challenge: %s", r.body)
			}
		})
	}
	unauth := 0
	for _, e := range f.server.Events() {
		if e.Kind == EventUnauthenticated {
			unauth++
		}
	}
	if unauth != 7 {
		t.Errorf("%d unauthenticated events, want 7", unauth)
	}
}

type hostOverride struct{ host string }

func (h hostOverride) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return http.DefaultTransport.RoundTrip(r)
}

func TestDeleteEndsTheSession(t *testing.T) {
	f := newFixture(t, Limits{})
	c := newRaw(t, f)
	c.initialize("2025-06-18")
	if r := c.do("DELETE", "", nil); r.status != 204 && r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := c.do("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil); r.status != 404 {
		t.Fatalf("after DELETE: %d %s", r.status, r.body)
	}
}

func TestLimits(t *testing.T) {
	t.Run("rate", func(t *testing.T) {
		f := newFixture(t, Limits{RequestsPerSecond: 5, Burst: 3})
		c := newRaw(t, f)
		c.initialize("2025-11-25") // two requests
		saw429 := false
		for i := range 20 {
			r := c.do("POST", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 10+i), nil)
			if r.status == 429 {
				saw429 = r.header.Get("Retry-After") != ""
				break
			}
		}
		if !saw429 {
			t.Fatal("no 429 with Retry-After under a flood")
		}
		time.Sleep(time.Second)
		if res := c.call(50, "files.stat", `{"path":[]}`); res["isError"] != false {
			t.Fatalf("session not usable after the flood: %v", res)
		}
	})
	t.Run("concurrency", func(t *testing.T) {
		f := newFixture(t, Limits{MaxConcurrent: 1})
		c := newRaw(t, f)
		c.initialize("2025-11-25")
		done := make(chan rawResponse, 1)
		go func() {
			done <- c.do("POST", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.block","arguments":{}}}`, nil)
		}()
		<-f.testTools.entered
		r := c.do("POST", `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil)
		if r.status != 503 || r.header.Get("Retry-After") == "" {
			t.Fatalf("second concurrent request: %d %s", r.status, r.body)
		}
		f.server.Close() // cancels the blocked call and frees the slot
		<-done
		<-f.testTools.cancelled
	})
	t.Run("call deadline", func(t *testing.T) {
		f := newFixture(t, Limits{CallTimeout: 100 * time.Millisecond})
		c := newRaw(t, f)
		c.initialize("2025-11-25")
		res := c.call(2, "test.block", `{}`)
		text := res["content"].([]any)[0].(map[string]any)["text"].(string)
		if res["isError"] != true || !strings.Contains(text, "per-call deadline") || !strings.Contains(text, kernel.CodeToolExecutionFailed) {
			t.Fatalf("deadline: %v", res)
		}
		if res := c.call(3, "files.stat", `{"path":[]}`); res["isError"] != false {
			t.Fatalf("session not usable after a deadline: %v", res)
		}
	})
	t.Run("result size", func(t *testing.T) {
		f := newFixture(t, Limits{MaxResultBytes: 4096})
		c := newRaw(t, f)
		c.initialize("2025-11-25")
		if res := c.call(2, "test.big", `{"n":100}`); res["isError"] != false {
			t.Fatalf("small result: %v", res)
		}
		res := c.call(3, "test.big", `{"n":10000}`)
		text := res["content"].([]any)[0].(map[string]any)["text"].(string)
		if res["isError"] != true || !strings.Contains(text, kernel.CodeInvalidToolResult) || !strings.Contains(text, "at most 4096") {
			t.Fatalf("big result: %v", res)
		}
		if res := c.call(4, "test.big", `{"n":10}`); res["isError"] != false {
			t.Fatalf("session not usable after a big result: %v", res)
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		f := newFixture(t, Limits{ReadHeaderTimeout: 200 * time.Millisecond})
		conn, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", f.addr) // never finishes the headers
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		line, _ := bufio.NewReader(conn).ReadString('\n')
		if time.Since(start) > 4*time.Second {
			t.Fatal("the server waited for the headers past its deadline")
		}
		if line != "" && !strings.Contains(line, "408") && !strings.Contains(line, "400") {
			t.Fatalf("slow headers answered %q", line)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		f := newFixture(t, Limits{ReadTimeout: 300 * time.Millisecond})
		conn, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", f.addr, f.token)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		resp, err := io.ReadAll(conn)
		if time.Since(start) > 4*time.Second {
			t.Fatal("the server waited for the body past its deadline")
		}
		if bytes.Contains(resp, []byte(" 500 ")) {
			t.Fatalf("slow body: %s (%v)", resp, err)
		}
	})
}

func TestMalformedFloodNeverFails(t *testing.T) {
	f := newFixture(t, Limits{RequestsPerSecond: 10000, Burst: 10000, MaxConcurrent: 64})
	bodies := []string{``, `{`, `null`, `[]`, `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1,"method":7}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, `{"jsonrpc":"2.0","id":{},"method":"initialize"}`,
		`{"jsonrpc":"1.0","id":1,"method":"initialize","params":{}}`, "\x00\x01", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}`}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newRaw(t, f)
			for i := range 40 {
				body := bodies[(w+i)%len(bodies)]
				r := c.do("POST", body, nil)
				if r.status >= 500 && r.status != 503 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%q → %d %s", body, r.status, r.body))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("server errors: %v", bad)
	}
}

// TestRawCancelledCall: a raw client sends notifications/cancelled for its call in
// flight; the kernel's context is cancelled and the call gets no result.
func TestRawCancelledCall(t *testing.T) {
	f := newFixture(t, Limits{})
	c := newRaw(t, f)
	c.initialize("2025-06-18")
	done := make(chan string, 1)
	go func() {
		_, body, _ := tryDo(c, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test.block","arguments":{}}}`)
		done <- body
	}()
	<-f.testTools.entered
	if r := c.do("POST", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user gave up"}}`, nil); r.status != 202 {
		t.Fatalf("cancel notification: %d %s", r.status, r.body)
	}
	select {
	case <-f.testTools.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the kernel call was not cancelled")
	}
	select {
	case body := <-done:
		if strings.Contains(body, `"result"`) {
			t.Fatalf("a cancelled call got a result: %s", body)
		}
	case <-time.After(5 * time.Second):
		// The SDK may leave a cancelled request unanswered; the client gives up on it.
	}
	waitFor(t, func() bool { return countDecision(f.server.Events(), DecisionCancelled) == 1 })
	if res := c.call(8, "files.stat", `{"path":[]}`); res["isError"] != false {
		t.Fatalf("session not usable after a cancel: %v", res)
	}
}
