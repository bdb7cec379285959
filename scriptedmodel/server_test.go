package scriptedmodel

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// threeSteps is the script most tests run: a read-list-write turn like the
// end-to-end tests'.
func threeSteps() Script {
	return Script{
		Steps: []Step{
			{Tool: "files.list", Arguments: json.RawMessage(`{"path":[]}`)},
			{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)},
			{Tool: "files.create", Arguments: json.RawMessage(`{"path":["out","new.txt"],"content":"hi"}`)},
		},
		Final: "all done",
	}
}

// conversation builds a request for api offering tools, with n tool results
// already in the conversation, each result's text given by result(i).
func conversation(api string, stream bool, tools []string, n int, result func(int) string) map[string]any {
	switch api {
	case APIAnthropic:
		var ts []any
		for _, name := range tools {
			ts = append(ts, map[string]any{"name": name, "input_schema": map[string]any{"type": "object"}})
		}
		msgs := []any{map[string]any{"role": "user", "content": "do it"}}
		for i := range n {
			id := fmt.Sprintf("toolu_%d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": tools[0], "input": map[string]any{}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
					"content": []any{map[string]any{"type": "text", "text": result(i)}}}}})
		}
		return map[string]any{"model": "claude-test", "stream": stream, "max_tokens": 100, "messages": msgs, "tools": ts}
	case APIResponses:
		var ts []any
		for _, name := range tools {
			ts = append(ts, map[string]any{"type": "function", "name": name, "parameters": map[string]any{"type": "object"}})
		}
		input := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "do it"}}}}
		for i := range n {
			id := fmt.Sprintf("call_%d", i)
			input = append(input,
				map[string]any{"type": "function_call", "call_id": id, "name": tools[0], "arguments": "{}"},
				map[string]any{"type": "function_call_output", "call_id": id, "output": result(i)})
		}
		return map[string]any{"model": "gpt-test", "stream": stream, "input": input, "tools": ts}
	default:
		var ts []any
		for _, name := range tools {
			ts = append(ts, map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}})
		}
		msgs := []any{map[string]any{"role": "user", "content": "do it"}}
		for i := range n {
			id := fmt.Sprintf("call_%d", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": tools[0], "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": result(i)})
		}
		req := map[string]any{"model": "chat-test", "stream": stream, "messages": msgs, "tools": ts}
		if stream {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
		return req
	}
}

func apiPath(api string) string {
	return map[string]string{APIAnthropic: "/v1/messages", APIResponses: "/v1/responses", APIChat: "/v1/chat/completions"}[api]
}

// stopFor is the stop_reason / status / finish_reason a reply carries.
func stopFor(api string, toolCall bool) string {
	if toolCall {
		return map[string]string{APIAnthropic: "tool_use", APIResponses: "completed", APIChat: "tool_calls"}[api]
	}
	return map[string]string{APIAnthropic: "end_turn", APIResponses: "completed", APIChat: "stop"}[api]
}

// TestStepSelection walks the script on every API, in SSE and JSON: the step is the
// number of tool results in the conversation, and after the last comes the final text.
func TestStepSelection(t *testing.T) {
	offered := []string{"mcp__sharedos__files_list", "mcp__sharedos__files_read", "mcp__sharedos__files_create"}
	for _, api := range []string{APIAnthropic, APIResponses, APIChat} {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", api, stream), func(t *testing.T) {
				sc := threeSteps()
				s := startServer(t, Options{Script: sc})
				for n := 0; n <= 4; n++ {
					req := conversation(api, stream, offered, n, func(i int) string { return fmt.Sprintf("result %d", i) })
					r := post(t, s, apiPath(api), req)
					if ct := r.header.Get("Content-Type"); stream != strings.HasPrefix(ct, contentSSE) {
						t.Fatalf("stream=%v but Content-Type %q", stream, ct)
					}
					got := readReply(t, api, r)
					log := s.Requests()[n]
					if log.Step != n || log.Stream != stream || len(log.ToolResults) != n {
						t.Fatalf("n=%d: log %+v", n, log)
					}
					if n < len(sc.Steps) {
						st := sc.Steps[n]
						want := "mcp__sharedos__" + portable(st.Tool)
						if got.kind != "tool" || got.name != want || got.stop != stopFor(api, true) {
							t.Fatalf("n=%d: got %+v, want a call to %s", n, got, want)
						}
						var wantArgs map[string]any
						json.Unmarshal(st.Arguments, &wantArgs)
						if fmt.Sprint(got.args) != fmt.Sprint(wantArgs) {
							t.Fatalf("n=%d: args %v, want %v", n, got.args, wantArgs)
						}
						if log.Reply != ReplyToolCall || log.StepTool != st.Tool || log.EmittedTool != want || !log.Offered || log.Via != ViaMCPPrefixed {
							t.Fatalf("n=%d: log %+v", n, log)
						}
						continue
					}
					if got.kind != "text" || got.text != sc.Final || got.stop != stopFor(api, false) || log.Reply != ReplyFinal {
						t.Fatalf("n=%d: got %+v, log %+v; want the final text", n, got, log)
					}
				}
				if n := len(s.Requests()); n != 5 {
					t.Fatalf("%d requests logged", n)
				}
			})
		}
	}
}

func TestUnofferedAndLocalSteps(t *testing.T) {
	sc := Script{Steps: []Step{
		{Tool: "files.delete", Arguments: json.RawMessage(`{"path":["x"]}`)},
		{Tool: "Bash", Local: true, Arguments: json.RawMessage(`{"command":"cat /etc/passwd"}`)},
		{Tool: "Bash", Local: true, Arguments: json.RawMessage(`{"command":"id"}`)},
	}, Final: "f"}
	for _, api := range []string{APIAnthropic, APIResponses, APIChat} {
		t.Run(api, func(t *testing.T) {
			s := startServer(t, Options{Script: sc})
			strict := []string{"mcp__sharedos__files_read"}
			// Step 0: the catalogue tool is not offered; the model asks by the best guess.
			got := readReply(t, api, post(t, s, apiPath(api), conversation(api, false, strict, 0, nil)))
			if got.name != "mcp__sharedos__files_delete" || got.namespace != "" {
				t.Fatalf("unoffered step emitted %+v", got)
			}
			l := s.Requests()[0]
			if l.Offered || l.Via != ViaNotOffered || l.EmittedTool != "mcp__sharedos__files_delete" || l.OfferedTools[0] != "mcp__sharedos__files_read" {
				t.Fatalf("log %+v", l)
			}
			// Step 1: the harness's shell, absent under a strict launch: asked for anyway.
			res := func(int) string { return "Error: No such tool available: mcp__sharedos__files_delete" }
			got = readReply(t, api, post(t, s, apiPath(api), conversation(api, true, strict, 1, res)))
			if got.name != "Bash" || got.args["command"] != "cat /etc/passwd" {
				t.Fatalf("local step emitted %+v", got)
			}
			l = s.Requests()[1]
			if !l.Local || l.Offered || l.Via != ViaLocal || l.EmittedTool != "Bash" || !strings.Contains(l.ToolResults[0], "No such tool") {
				t.Fatalf("log %+v", l)
			}
			// Step 2: a launch that does offer Bash; the log says it was offered.
			readReply(t, api, post(t, s, apiPath(api), conversation(api, false, append(strict, "Bash"), 2, res)))
			if l = s.Requests()[2]; !l.Offered || l.EmittedTool != "Bash" {
				t.Fatalf("log %+v", l)
			}
		})
	}
}

// A request offering no tools (a title or quota probe) gets SideText and does not
// consume a step.
func TestSideRequest(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps()})
	for _, api := range []string{APIAnthropic, APIResponses, APIChat} {
		got := readReply(t, api, post(t, s, apiPath(api), conversation(api, true, nil, 0, nil)))
		if got.kind != "text" || got.text != SideText {
			t.Fatalf("%s: got %+v", api, got)
		}
	}
	for _, l := range s.Requests() {
		if l.Reply != ReplySideText || l.Step != 0 || l.EmittedTool != "" {
			t.Fatalf("log %+v", l)
		}
	}
}

func TestCodeModeAndProxyThroughServer(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps()})
	// Codex code mode: no tools, an additional_tools item with the freeform exec.
	req := map[string]any{"model": "gpt-test", "stream": true, "input": []any{
		map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
			map[string]any{"type": "namespace", "name": "functions", "tools": []any{
				map[string]any{"type": "custom", "name": "exec", "format": map[string]any{"type": "text"}}}}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "go"}}},
		map[string]any{"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "..."},
		map[string]any{"type": "custom_tool_call_output", "call_id": "c1", "output": []any{map[string]any{"type": "input_text", "text": "listed"}}},
	}}
	got := readReply(t, APIResponses, post(t, s, "/v1/responses", req))
	if got.kind != "custom" || got.name != "exec" || got.namespace != "functions" ||
		got.input != "const r = await tools.mcp__sharedos__files_read({\"path\":[\"README.md\"]});\ntext(JSON.stringify(r));" {
		t.Fatalf("code mode emitted %+v", got)
	}
	if l := s.Requests()[0]; l.Step != 1 || l.Via != ViaCodexCodeMode || l.ToolResults[0] != "listed" {
		t.Fatalf("log %+v", l)
	}
	// pi-mcp-adapter proxy over Chat Completions.
	chat := conversation(APIChat, true, []string{"mcp"}, 0, nil)
	got = readReply(t, APIChat, post(t, s, "/v1/chat/completions", chat))
	if got.name != "mcp" || got.args["tool"] != "sharedos_files_list" || fmt.Sprint(got.args["args"]) != "map[path:[]]" {
		t.Fatalf("proxy emitted %+v", got)
	}
	// A proxy whose schema wants args as a JSON string gets one.
	chat["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "mcp",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"tool": map[string]any{"type": "string"}, "args": map[string]any{"type": "string"}}}}}}
	got = readReply(t, APIChat, post(t, s, "/v1/chat/completions", chat))
	if got.args["args"] != `{"path":[]}` {
		t.Fatalf("string-args proxy emitted %+v", got)
	}
}

func TestModelsCountTokensAndQuery(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps(), ModelID: "scripted-x"})
	r := do(t, http.MethodGet, s.URL()+"/v1/models", nil, nil)
	m := obj(t, string(r.body))
	if r.status != 200 || m["data"].([]any)[0].(map[string]any)["id"] != "scripted-x" {
		t.Fatalf("models: %d %s", r.status, r.body)
	}
	r = do(t, http.MethodGet, s.URL()+"/v1/models/scripted-x?beta=true", nil, nil)
	if r.status != 200 || obj(t, string(r.body))["id"] != "scripted-x" {
		t.Fatalf("model: %d %s", r.status, r.body)
	}
	r = post(t, s, "/v1/messages/count_tokens?beta=true", `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`)
	if r.status != 200 || obj(t, string(r.body))["input_tokens"].(float64) < 1 {
		t.Fatalf("count_tokens: %d %s", r.status, r.body)
	}
	// Query strings are ignored for routing and kept in the log.
	readReply(t, APIAnthropic, post(t, s, "/v1/messages?beta=true", conversation(APIAnthropic, true, []string{"mcp__sharedos__files_list"}, 0, nil)))
	// A base URL may carry a prefix before /v1.
	readReply(t, APIChat, post(t, s, "/proxy/v1/chat/completions/", conversation(APIChat, false, []string{"mcp__sharedos__files_list"}, 0, nil)))
	if r := do(t, http.MethodHead, s.URL()+"/", nil, nil); r.status != 200 {
		t.Fatalf("HEAD: %d", r.status)
	}
	logs := s.Requests()
	kinds := []string{ReplyModels, ReplyModels, ReplyCountTokens, ReplyToolCall, ReplyToolCall, ReplyProbe}
	for i, k := range kinds {
		if logs[i].Reply != k {
			t.Fatalf("request %d: reply %q, want %q (%+v)", i, logs[i].Reply, k, logs[i])
		}
	}
	if logs[3].Path != "/v1/messages?beta=true" || logs[3].API != APIAnthropic {
		t.Fatalf("log %+v", logs[3])
	}
}

func TestMalformedRequests(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps()})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"mcp__sharedos__files_list"}]}`))
	zw.Close()
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		errShape                 string // "anthropic" or "openai"
	}{
		{"bad JSON", "POST", "/v1/messages", `{"model":`, nil, 400, "anthropic"},
		{"array body", "POST", "/v1/messages", `[]`, nil, 400, "anthropic"},
		{"empty body", "POST", "/v1/chat/completions", ``, nil, 400, "openai"},
		{"no messages", "POST", "/v1/messages", `{"model":"m"}`, nil, 400, "anthropic"},
		{"stream not a bool", "POST", "/v1/chat/completions", `{"messages":[],"stream":"yes"}`, nil, 400, "openai"},
		{"messages not a list", "POST", "/v1/chat/completions", `{"messages":{}}`, nil, 400, "openai"},
		{"no input", "POST", "/v1/responses", `{"model":"m"}`, nil, 400, "openai"},
		{"input a number", "POST", "/v1/responses", `{"input":3}`, nil, 400, "openai"},
		{"count_tokens bad JSON", "POST", "/v1/messages/count_tokens", `nope`, nil, 400, "anthropic"},
		{"GET messages", "GET", "/v1/messages", ``, nil, 405, "anthropic"},
		{"PUT responses", "PUT", "/v1/responses", `{}`, nil, 405, "openai"},
		{"POST models", "POST", "/v1/models", `{}`, nil, 405, "openai"},
		{"unknown path", "POST", "/v1/completions", `{}`, nil, 404, "openai"},
		{"root", "GET", "/", ``, nil, 404, "openai"},
		{"bad gzip", "POST", "/v1/messages", `not gzip`, map[string]string{"Content-Encoding": "gzip"}, 400, "anthropic"},
		{"unknown encoding", "POST", "/v1/messages", `{}`, map[string]string{"Content-Encoding": "zstd"}, 415, "anthropic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, c.method, s.URL()+c.path, []byte(c.body), c.header)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			m := obj(t, string(r.body))
			e, _ := m["error"].(map[string]any)
			if msg, _ := e["message"].(string); msg == "" {
				t.Fatalf("no error message: %s", r.body)
			}
			if (m["type"] == "error") != (c.errShape == "anthropic") {
				t.Fatalf("error shape: %s", r.body)
			}
			if c.status == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	for _, l := range s.Requests() {
		if l.Reply != ReplyError || l.Error == "" || l.Status < 400 || l.Status > 499 {
			t.Fatalf("log %+v", l)
		}
	}
	// The server is still fine, and a gzip body is read.
	r := do(t, "POST", s.URL()+"/v1/messages", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if got := readReply(t, APIAnthropic, r); got.name != "mcp__sharedos__files_list" {
		t.Fatalf("after errors: %+v", got)
	}
}

func TestConcurrentRequests(t *testing.T) {
	var mu sync.Mutex
	seen := 0
	s := startServer(t, Options{Script: threeSteps(), OnRequest: func(RequestLog) { mu.Lock(); seen++; mu.Unlock() },
		Logger: slog.New(slog.DiscardHandler)})
	offered := []string{"mcp__sharedos__files_list", "mcp__sharedos__files_read", "mcp__sharedos__files_create"}
	const workers, each = 8, 12
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				api := []string{APIAnthropic, APIResponses, APIChat}[(w+i)%3]
				n := (w + i) % 4
				body, _ := json.Marshal(conversation(api, i%2 == 0, offered, n, func(int) string { return "r" }))
				resp, err := http.Post(s.URL()+apiPath(api), "application/json", bytes.NewReader(body))
				if err != nil {
					errs <- err.Error()
					return
				}
				var buf bytes.Buffer
				buf.ReadFrom(resp.Body)
				resp.Body.Close()
				want := "all done"
				if n < 3 {
					want = offered[n]
				}
				if resp.StatusCode != 200 || !strings.Contains(buf.String(), want) {
					errs <- fmt.Sprintf("%s n=%d: %d %s", api, n, resp.StatusCode, buf.String())
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := len(s.Requests()); got != workers*each {
		t.Fatalf("%d requests logged, want %d", got, workers*each)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != workers*each {
		t.Fatalf("OnRequest saw %d", seen)
	}
}

func TestToolResultTruncated(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps()})
	long := strings.Repeat("é", 3000) // 6000 bytes, two bytes a rune
	post(t, s, "/v1/chat/completions", conversation(APIChat, false, []string{"x"}, 1, func(int) string { return long }))
	got := s.Requests()[0].ToolResults[0]
	if len(got) > maxResultText || !strings.HasSuffix(got, "…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Fatalf("truncated to %d bytes: %q…", len(got), got[:20])
	}
}

func TestServeAndClose(t *testing.T) {
	s, err := New(Options{Script: DemoScript()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Serve on 0.0.0.0: %v", err)
	}
	if s.URL() != "" {
		t.Fatalf("URL after a refused listener: %q", s.URL())
	}
	s.Close()
	s.Close() // idempotent
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(l); err == nil {
		t.Fatal("Serve after Close succeeded")
	}
}

func TestRequestLogJSON(t *testing.T) {
	s := startServer(t, Options{Script: threeSteps()})
	post(t, s, "/v1/messages", conversation(APIAnthropic, true, []string{"mcp__sharedos__files_list"}, 0, nil))
	data, err := json.Marshal(s.Requests()[0])
	if err != nil {
		t.Fatal(err)
	}
	m := obj(t, string(data))
	for _, k := range []string{"time", "api", "path", "model", "stream", "offeredTools", "step", "stepTool", "emittedTool", "via", "offered", "reply"} {
		if _, ok := m[k]; !ok {
			t.Errorf("log JSON lacks %q: %s", k, data)
		}
	}
}

func BenchmarkAnthropicSSE(b *testing.B) {
	s := startServer(b, Options{Script: threeSteps()})
	body, _ := json.Marshal(conversation(APIAnthropic, true, []string{"mcp__sharedos__files_list", "mcp__sharedos__files_read"}, 1, func(int) string { return "r" }))
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Post(s.URL()+"/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}

func TestReadBodyLimitsAndEncodings(t *testing.T) {
	big := bytes.Repeat([]byte(" "), maxBody+1)
	w := httptest.NewRecorder()
	if _, status, err := readBody(w, httptest.NewRequest("POST", "/v1/messages", bytes.NewReader(big))); status != http.StatusRequestEntityTooLarge || err == nil {
		t.Fatalf("oversized body: %d %v", status, err)
	}
	// A small compressed body that expands past the limit is refused too.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(big)
	zw.Close()
	req := httptest.NewRequest("POST", "/v1/messages", &gz)
	req.Header.Set("Content-Encoding", "gzip")
	if _, status, err := readBody(w, req); status != http.StatusRequestEntityTooLarge || err == nil {
		t.Fatalf("gzip bomb: %d %v", status, err)
	}
	// HTTP deflate is zlib-wrapped.
	var zb bytes.Buffer
	zl := zlib.NewWriter(&zb)
	zl.Write([]byte(`{"a":1}`))
	zl.Close()
	req = httptest.NewRequest("POST", "/v1/messages", &zb)
	req.Header.Set("Content-Encoding", "deflate")
	if body, _, err := readBody(w, req); err != nil || string(body) != `{"a":1}` {
		t.Fatalf("deflate: %q %v", body, err)
	}
}
