package scriptedmodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// startServer runs a real server on 127.0.0.1 for the test's lifetime.
func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	// URL is set once Serve has registered the listener.
	for deadline := time.Now().Add(5 * time.Second); s.URL() == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("server never registered its listener")
		}
	}
	return s
}

type httpReply struct {
	status int
	header http.Header
	body   []byte
}

func do(t testing.TB, method, url string, body []byte, header map[string]string) httpReply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpReply{resp.StatusCode, resp.Header, data}
}

func post(t testing.TB, s *Server, path string, body any) httpReply {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	return do(t, http.MethodPost, s.URL()+path, data, nil)
}

// sseEv is one parsed server-sent event.
type sseEv struct {
	name string
	data string
}

// parseSSE reads an event stream the way the CLIs' SDKs do: "event:" and "data:"
// fields, events ended by a blank line.
func parseSSE(t testing.TB, body []byte) []sseEv {
	t.Helper()
	var out []sseEv
	var cur sseEv
	var data []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil || cur.name != "" {
				cur.data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data = sseEv{}, nil
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.name != "" || data != nil {
		t.Fatalf("SSE stream does not end with a blank line")
	}
	return out
}

func eventNames(evs []sseEv) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// obj decodes JSON into a generic map, failing the test on error.
func obj(t testing.TB, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, data)
	}
	return m
}

// emitted is a tool call or text read back from a reply, API-independent.
type emitted struct {
	kind      string // "tool" (function-style), "custom", or "text"
	name      string
	namespace string
	args      map[string]any // function-style arguments
	input     string         // custom tool input
	text      string
	stop      string // stop_reason / finish_reason / response status
}

// readReply reassembles what the model said from a reply, the way each CLI does:
// SSE streams are folded event by event, JSON bodies read directly. It also checks
// the event sequence each CLI accepted from the reference fake.
func readReply(t testing.TB, api string, r httpReply) emitted {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	stream := strings.HasPrefix(r.header.Get("Content-Type"), contentSSE)
	var e emitted
	switch api {
	case APIAnthropic:
		if !stream {
			m := obj(t, string(r.body))
			block := m["content"].([]any)[0].(map[string]any)
			e.stop = m["stop_reason"].(string)
			if block["type"] == "tool_use" {
				e.kind, e.name, e.args = "tool", block["name"].(string), block["input"].(map[string]any)
			} else {
				e.kind, e.text = "text", block["text"].(string)
			}
			return e
		}
		evs := parseSSE(t, r.body)
		want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
		if got := eventNames(evs); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("anthropic events %v, want %v", got, want)
		}
		var partial strings.Builder
		for _, ev := range evs {
			m := obj(t, ev.data)
			if m["type"] != ev.name {
				t.Fatalf("event %q carries type %v", ev.name, m["type"])
			}
			switch ev.name {
			case "content_block_start":
				b := m["content_block"].(map[string]any)
				if b["type"] == "tool_use" {
					e.kind, e.name = "tool", b["name"].(string)
					if id, _ := b["id"].(string); !strings.HasPrefix(id, "toolu_") {
						t.Fatalf("tool_use id %q", id)
					}
				} else {
					e.kind = "text"
				}
			case "content_block_delta":
				d := m["delta"].(map[string]any)
				switch d["type"] {
				case "input_json_delta":
					partial.WriteString(d["partial_json"].(string))
				case "text_delta":
					e.text += d["text"].(string)
				default:
					t.Fatalf("delta type %v", d["type"])
				}
			case "message_delta":
				e.stop = m["delta"].(map[string]any)["stop_reason"].(string)
			}
		}
		if e.kind == "tool" {
			e.args = obj(t, partial.String())
		}
		return e
	case APIResponses:
		var item map[string]any
		if !stream {
			m := obj(t, string(r.body))
			e.stop = m["status"].(string)
			item = m["output"].([]any)[0].(map[string]any)
		} else {
			evs := parseSSE(t, r.body)
			want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_item.done", "response.completed"}
			var delta string
			for i, ev := range evs {
				m := obj(t, ev.data)
				if m["type"] != ev.name || m["sequence_number"] != float64(i) {
					t.Fatalf("event %d %q: type %v sequence %v", i, ev.name, m["type"], m["sequence_number"])
				}
				switch ev.name {
				case "response.output_text.delta":
					delta += m["delta"].(string)
				case "response.output_item.done":
					item = m["item"].(map[string]any)
				case "response.completed":
					resp := m["response"].(map[string]any)
					e.stop = resp["status"].(string)
					if out := resp["output"].([]any); len(out) != 1 {
						t.Fatalf("completed response has %d output items", len(out))
					}
				}
			}
			if item["type"] == "message" {
				want = []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_text.delta", "response.output_item.done", "response.completed"}
				if delta != item["content"].([]any)[0].(map[string]any)["text"] {
					t.Fatalf("delta %q does not match the item text", delta)
				}
			}
			if got := eventNames(evs); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("responses events %v, want %v", got, want)
			}
		}
		e.namespace, _ = item["namespace"].(string)
		switch item["type"] {
		case "function_call":
			e.kind, e.name = "tool", item["name"].(string)
			e.args = obj(t, item["arguments"].(string))
			if id, _ := item["call_id"].(string); id == "" {
				t.Fatal("function_call without call_id")
			}
		case "custom_tool_call":
			e.kind, e.name, e.input = "custom", item["name"].(string), item["input"].(string)
			if id, _ := item["call_id"].(string); id == "" {
				t.Fatal("custom_tool_call without call_id")
			}
		case "message":
			e.kind = "text"
			e.text = item["content"].([]any)[0].(map[string]any)["text"].(string)
		default:
			t.Fatalf("output item type %v", item["type"])
		}
		return e
	case APIChat:
		if !stream {
			m := obj(t, string(r.body))
			ch := m["choices"].([]any)[0].(map[string]any)
			e.stop = ch["finish_reason"].(string)
			msg := ch["message"].(map[string]any)
			if calls, ok := msg["tool_calls"].([]any); ok {
				fn := calls[0].(map[string]any)["function"].(map[string]any)
				e.kind, e.name, e.args = "tool", fn["name"].(string), obj(t, fn["arguments"].(string))
			} else {
				e.kind, e.text = "text", msg["content"].(string)
			}
			return e
		}
		evs := parseSSE(t, r.body)
		if len(evs) < 3 || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("chat stream does not end with [DONE]: %v", evs)
		}
		var args strings.Builder
		for _, ev := range evs[:len(evs)-1] {
			if ev.name != "" {
				t.Fatalf("chat events carry no names, got %q", ev.name)
			}
			m := obj(t, ev.data)
			if m["object"] != "chat.completion.chunk" {
				t.Fatalf("chunk object %v", m["object"])
			}
			for _, c := range m["choices"].([]any) {
				ch := c.(map[string]any)
				d := ch["delta"].(map[string]any)
				if s, ok := d["content"].(string); ok {
					e.text += s
				}
				for _, tc := range asSlice(d["tool_calls"]) {
					fn := tc.(map[string]any)["function"].(map[string]any)
					if n, ok := fn["name"].(string); ok {
						e.kind, e.name = "tool", n
					}
					args.WriteString(fn["arguments"].(string))
				}
				if f, ok := ch["finish_reason"].(string); ok {
					e.stop = f
				}
			}
		}
		if e.kind == "tool" {
			e.args = obj(t, args.String())
		} else {
			e.kind = "text"
		}
		return e
	}
	t.Fatalf("unknown api %s", api)
	return e
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}
