package scriptedmodel

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleEntry is one line of a reference sample's model.jsonl: a request a real CLI
// sent to the reference fake, and which branch of the fake answered it.
type sampleEntry struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Branch string          `json:"branch"`
}

func loadSample(t *testing.T, dir string) []sampleEntry {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", dir, "model.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sampleEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var e sampleEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// recordedCall is the tool call a CLI echoed back in its next request: what it
// accepted from the reference fake's reply.
func recordedCall(t *testing.T, api string, body json.RawMessage) emitted {
	t.Helper()
	var e emitted
	switch api {
	case APIAnthropic:
		var req struct {
			Messages []struct {
				Role    string            `json:"role"`
				Content []json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		for _, m := range req.Messages {
			for _, b := range m.Content {
				bm := obj(t, string(b))
				if m.Role == "assistant" && bm["type"] == "tool_use" {
					e.kind, e.name, e.args = "tool", bm["name"].(string), bm["input"].(map[string]any)
				}
			}
		}
	case APIResponses:
		var req struct {
			Input []map[string]any `json:"input"`
		}
		json.Unmarshal(body, &req)
		for _, it := range req.Input {
			e.namespace, _ = it["namespace"].(string)
			switch it["type"] {
			case "function_call":
				e.kind, e.name, e.args = "tool", it["name"].(string), obj(t, it["arguments"].(string))
				return e
			case "custom_tool_call":
				e.kind, e.name, e.input = "custom", it["name"].(string), it["input"].(string)
				return e
			}
		}
		e.namespace = ""
	case APIChat:
		var req struct {
			Messages []struct {
				Role      string `json:"role"`
				ToolCalls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		for _, m := range req.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				fn := m.ToolCalls[0].Function
				e.kind, e.name, e.args = "tool", fn.Name, obj(t, fn.Arguments)
			}
		}
	}
	return e
}

// TestReferenceSamples replays every request the real CLIs sent in the reference
// runs through a real server, with the samples' script (call echo once, then
// answer) written as a Script. Each reply must be the one the fake gave in that
// run, in the shape the CLI accepted: the same branch, the same tool call the CLI
// echoed back in its next request, the same event sequence.
func TestReferenceSamples(t *testing.T) {
	echo := map[string]any{"text": "hello from the fake model"}
	script := Script{Steps: []Step{{Tool: "echo", Arguments: json.RawMessage(`{"text":"hello from the fake model"}`)}}, Final: "FAKE-DONE"}
	cases := []struct {
		dir      string
		api      string
		path     string
		wantCall emitted // the call for step 0 (args checked against echo unless custom)
		wantVia  string
		offered  []string
	}{
		{"all-claude-1", APIAnthropic, "/v1/messages?beta=true", emitted{kind: "tool", name: "mcp__sharedos__echo"}, ViaMCPPrefixed,
			[]string{"mcp__sharedos__echo"}},
		{"all-codex-1", APIResponses, "/v1/responses", emitted{kind: "tool", name: "echo", namespace: "mcp__sharedos"}, ViaCodexNamespace,
			[]string{"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource", "mcp__sharedos__echo"}},
		{"codex-codemode", APIResponses, "/v1/responses", emitted{kind: "custom", name: "exec", namespace: "functions"}, ViaCodexCodeMode,
			[]string{"exec", "wait", "send_message_to_user_async"}},
		{"all-pi16-adapter-1", APIChat, "/v1/chat/completions", emitted{kind: "tool", name: "sharedos_echo"}, ViaPiAdapter,
			[]string{"sharedos_echo"}},
		{"all-pi16-builtin-1", APIChat, "/v1/chat/completions", emitted{kind: "tool", name: "mcp__sharedos__echo"}, ViaMCPPrefixed,
			[]string{"mcp__sharedos__echo"}},
		{"all-pi16-rpc-1", APIChat, "/v1/chat/completions", emitted{kind: "tool", name: "mcp__sharedos__echo"}, ViaMCPPrefixed,
			[]string{"mcp__sharedos__echo"}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			entries := loadSample(t, c.dir)
			if len(entries) != 2 {
				t.Fatalf("sample has %d requests, want 2", len(entries))
			}
			s := startServer(t, Options{Script: script})
			for i, en := range entries {
				if en.Path != c.path {
					t.Fatalf("sample request %d path %q, want %q", i, en.Path, c.path)
				}
				got := readReply(t, c.api, post(t, s, en.Path, []byte(en.Body)))
				log := s.Requests()[i]
				if log.API != c.api || log.Path != c.path || !log.Stream {
					t.Fatalf("log %+v", log)
				}
				if en.Branch == "final" {
					if got.kind != "text" || got.text != "FAKE-DONE" || log.Reply != ReplyFinal || log.Step != 1 {
						t.Fatalf("request %d: got %+v, log %+v; want the final text", i, got, log)
					}
					if len(log.ToolResults) != 1 || !strings.Contains(log.ToolResults[0], "echo: hello from the fake model") {
						t.Fatalf("tool results seen: %q", log.ToolResults)
					}
					continue
				}
				// A tool call, the one the fake made in this run.
				if log.Reply != ReplyToolCall || log.Step != 0 || log.Via != c.wantVia || !log.Offered || log.EmittedTool != c.wantCall.name {
					t.Fatalf("request %d log %+v", i, log)
				}
				if got.kind != c.wantCall.kind || got.name != c.wantCall.name || got.namespace != c.wantCall.namespace {
					t.Fatalf("request %d emitted %+v, want %+v", i, got, c.wantCall)
				}
				for _, want := range c.offered {
					if !contains(log.OfferedTools, want) {
						t.Fatalf("offered tools %q lack %q", log.OfferedTools, want)
					}
				}
				// The call must be the one the CLI echoed back in its next request.
				rec := recordedCall(t, c.api, entries[i+1].Body)
				if rec.kind != got.kind || rec.name != got.name || rec.namespace != got.namespace {
					t.Fatalf("emitted %+v, but the CLI accepted %+v", got, rec)
				}
				if got.kind == "custom" {
					if !strings.Contains(got.input, "await tools.mcp__sharedos__echo(") || !strings.Contains(rec.input, "await tools.mcp__sharedos__echo(") {
						t.Fatalf("code-mode input %q (accepted: %q)", got.input, rec.input)
					}
					continue
				}
				if !reflect.DeepEqual(got.args, echo) || !reflect.DeepEqual(rec.args, echo) {
					t.Fatalf("arguments %v (accepted: %v)", got.args, rec.args)
				}
				if got.stop != map[string]string{APIAnthropic: "tool_use", APIResponses: "completed", APIChat: "tool_calls"}[c.api] {
					t.Fatalf("stop %q", got.stop)
				}
			}
		})
	}
}

// TestReferenceSamplesCatalogueNames adapts the samples to the catalogue's dotted
// names: the tool the CLI offered is renamed as each harness would name files.read,
// and the script asks for files.read.
func TestReferenceSamplesCatalogueNames(t *testing.T) {
	script := Script{Steps: []Step{{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)}}, Final: "done"}
	cases := []struct {
		dir, api, path, from, to, wantName, wantVia string
	}{
		{"all-claude-1", APIAnthropic, "/v1/messages?beta=true", `"mcp__sharedos__echo"`, `"mcp__sharedos__files_read"`, "mcp__sharedos__files_read", ViaMCPPrefixed},
		{"all-codex-1", APIResponses, "/v1/responses", `"name": "echo"`, `"name": "files_read"`, "files_read", ViaCodexNamespace},
		{"all-pi16-adapter-1", APIChat, "/v1/chat/completions", `"sharedos_echo"`, `"sharedos_files_read"`, "sharedos_files_read", ViaPiAdapter},
		{"all-pi16-builtin-1", APIChat, "/v1/chat/completions", `"mcp__sharedos__echo"`, `"mcp__sharedos__files_read"`, "mcp__sharedos__files_read", ViaMCPPrefixed},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			entries := loadSample(t, c.dir)
			// Re-encode with spaces after colons so the rename matches one spelling.
			var body any
			json.Unmarshal(entries[0].Body, &body)
			raw, _ := json.MarshalIndent(body, "", " ")
			renamed := strings.ReplaceAll(string(raw), c.from, c.to)
			if renamed == string(raw) {
				t.Fatalf("%s not found in the sample", c.from)
			}
			s := startServer(t, Options{Script: script})
			got := readReply(t, c.api, post(t, s, c.path, renamed))
			if got.name != c.wantName || got.args["path"].([]any)[0] != "README.md" {
				t.Fatalf("emitted %+v", got)
			}
			if l := s.Requests()[0]; l.Via != c.wantVia || !l.Offered {
				t.Fatalf("log %+v", l)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shape reduces JSON to its structure: object keys and value kinds, recursively,
// with array elements merged. Ids, times and texts differ between the fakes; the
// structure is what a CLI's parser depends on.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return []any{shape(x[0])}
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", x)
	}
}

// TestReferenceReplyShapes compares each reply with the reference fake's reply to
// the same request (the bytes the CLI accepted in the sample run): the same SSE
// event sequence, and every event's data of the same JSON shape.
func TestReferenceReplyShapes(t *testing.T) {
	script := Script{Steps: []Step{{Tool: "echo", Arguments: json.RawMessage(`{"text":"hello from the fake model"}`)}}, Final: "FAKE-DONE"}
	for _, dir := range []string{"all-claude-1", "all-codex-1", "codex-codemode", "all-pi16-adapter-1", "all-pi16-builtin-1", "all-pi16-rpc-1"} {
		t.Run(dir, func(t *testing.T) {
			s := startServer(t, Options{Script: script})
			for i, en := range loadSample(t, dir) {
				ref, err := os.ReadFile(filepath.Join("testdata", dir, fmt.Sprintf("reference-reply-%d.txt", i)))
				if err != nil {
					t.Fatal(err)
				}
				r := post(t, s, en.Path, []byte(en.Body))
				if !strings.HasPrefix(r.header.Get("Content-Type"), contentSSE) {
					t.Fatalf("request %d: Content-Type %q", i, r.header.Get("Content-Type"))
				}
				ours, theirs := parseSSE(t, r.body), parseSSE(t, ref)
				if a, b := eventNames(ours), eventNames(theirs); len(ours) != len(theirs) || fmt.Sprint(a) != fmt.Sprint(b) {
					t.Fatalf("request %d: events %q, reference %q", i, a, b)
				}
				for j := range ours {
					if ours[j].data == "[DONE]" || theirs[j].data == "[DONE]" {
						if ours[j].data != theirs[j].data {
							t.Fatalf("request %d event %d: %q vs %q", i, j, ours[j].data, theirs[j].data)
						}
						continue
					}
					var a, b any
					json.Unmarshal([]byte(ours[j].data), &a)
					json.Unmarshal([]byte(theirs[j].data), &b)
					if !reflect.DeepEqual(shape(a), shape(b)) {
						t.Fatalf("request %d event %d (%s) differs in shape:\nours      %s\nreference %s", i, j, ours[j].name, ours[j].data, theirs[j].data)
					}
				}
			}
		})
	}
}
