package harnessspec

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// feed runs a whole stream through a parser the way the launcher does, line
// by line, and returns the outcome and the index of the first line that asked
// to close stdin (-1 if none).
func feed(p Parser, stream []byte) (Outcome, int) {
	closeAt := -1
	for i, line := range bytes.Split(stream, []byte("\n")) {
		if p.Feed(line).CloseStdin && closeAt < 0 {
			closeAt = i
		}
	}
	return p.Outcome(), closeAt
}

func readStream(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lineCount(b []byte) int { return len(bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))) }

type parserCase struct {
	spec   string
	stream string // under testdata/
	opts   map[string]string

	done, failed bool
	reason       string
	finalPrefix  string
	messages     int
	servers      []ServerStatus
	localTools   []string // nil = not reported
	calls        []ToolCall
	usage        *Usage
	errors       []string // substrings, in order
	warnings     int
	closeAtLast  bool // CloseStdin on the last line, not before
	closeNever   bool
}

func parserCases() []parserCase {
	echoCall := func(id, name, status string) ToolCall {
		return ToolCall{ID: id, Name: name, Server: "sharedos", Tool: "echo", Status: status}
	}
	return []parserCase{
		// Real streams from the probe runs.
		{spec: "claude-code", stream: "samples/claude.jsonl", done: true, reason: "completed",
			finalPrefix: "FAKE-DONE: echo: hello from the fake model", messages: 1,
			servers:    []ServerStatus{{"sharedos", "connected"}},
			localTools: []string{},
			calls:      []ToolCall{echoCall("toolu_7d92c7bf01c5484abc2e", "mcp__sharedos__echo", CallCompleted)},
			usage:      &Usage{24, 20}, closeNever: true},
		{spec: "codex", stream: "samples/codex.jsonl", done: true, reason: "turn.completed",
			finalPrefix: "FAKE-DONE: Wall time", messages: 1,
			calls: []ToolCall{echoCall("item_1", "echo", CallCompleted)},
			usage: &Usage{24, 20}, warnings: 1, closeNever: true},
		{spec: "codex", stream: "samples/codex-codemode.jsonl", done: true, reason: "turn.completed",
			finalPrefix: "FAKE-DONE: Script completed", messages: 1,
			calls: []ToolCall{echoCall("item_0", "echo", CallCompleted)},
			usage: &Usage{24, 20}, closeNever: true},
		{spec: "pi", stream: "samples/pi-extension-json.jsonl", opts: map[string]string{"pi-mode": "json"},
			done: true, reason: "stop", finalPrefix: "FAKE-DONE: echo: hello from the fake model", messages: 1,
			calls: []ToolCall{echoCall("call_f98f74664b24", "sharedos_echo", CallCompleted)},
			usage: &Usage{24, 20}, closeAtLast: true},
		{spec: "pi", stream: "samples/pi-native-json.jsonl", opts: map[string]string{"pi-mcp": "native", "pi-mode": "json"},
			done: true, reason: "stop", finalPrefix: "FAKE-DONE: echo: hello from the fake model", messages: 1,
			calls: []ToolCall{echoCall(pick("call_"), "mcp__sharedos__echo", CallCompleted)},
			usage: &Usage{24, 20}, closeAtLast: true},
		{spec: "pi", stream: "samples/pi-native-rpc.jsonl", opts: map[string]string{"pi-mcp": "native"},
			done: true, reason: "stop", finalPrefix: "FAKE-DONE: echo: hello from the fake model", messages: 1,
			calls: []ToolCall{echoCall("call_1874416ad142", "mcp__sharedos__echo", CallCompleted)},
			usage: &Usage{24, 20}, closeAtLast: true},

		// Hand-made failures.
		{spec: "claude-code", stream: "streams/claude-is-error.jsonl", done: true, failed: true, reason: "completed",
			finalPrefix: "API Error: 500",
			servers:     []ServerStatus{{"sharedos", "failed"}},
			localTools:  []string{"Bash"},
			calls:       []ToolCall{{ID: "toolu_1", Name: "Bash", Status: CallFailed}},
			usage:       &Usage{7, 3},
			errors:      []string{"MCP server sharedos: failed", "API Error: 500"},
			warnings:    1, closeNever: true},
		{spec: "claude-code", stream: "streams/claude-max-turns.jsonl", done: true, failed: true, reason: "error_max_turns",
			servers: []ServerStatus{{"sharedos", "connected"}}, localTools: []string{},
			usage: &Usage{5, 1}, errors: []string{"Reached maximum number of turns"}, closeNever: true},
		{spec: "claude-code", stream: "streams/claude-truncated.jsonl",
			servers: []ServerStatus{{"sharedos", "connected"}}, localTools: []string{},
			calls:      []ToolCall{{ID: "toolu_9", Name: "mcp__sharedos__files_read", Server: "sharedos", Tool: "files_read", Status: CallStarted}},
			closeNever: true},
		{spec: "codex", stream: "streams/codex-turn-failed.jsonl", done: true, failed: true, reason: "turn.failed",
			errors: []string{"Reconnecting", "stream disconnected"}, closeNever: true},
		{spec: "codex", stream: "streams/codex-truncated.jsonl",
			calls:      []ToolCall{{ID: "item_0", Name: "files.read", Server: "sharedos", Tool: "files.read", Status: CallStarted}},
			closeNever: true},
		{spec: "pi", stream: "streams/pi-stop-error.jsonl", opts: map[string]string{"pi-mode": "json"},
			done: true, failed: true, reason: "error", usage: &Usage{0, 0},
			errors: []string{"Connection error."}, closeAtLast: true},
		{spec: "pi", stream: "streams/pi-rpc-rejected.jsonl", done: true, failed: true, reason: "prompt_rejected",
			errors: []string{"No model selected"}, closeAtLast: true},
		{spec: "pi", stream: "streams/pi-truncated.jsonl",
			calls:      []ToolCall{{ID: "call_1", Name: "mcp__sharedos__files_read", Server: "sharedos", Tool: "files_read", Status: CallStarted}},
			closeNever: true},
		{spec: "deepseek", stream: "streams/dsh-completed.jsonl", done: true, reason: "completed",
			finalPrefix: "done", messages: 2, closeNever: true},
		{spec: "deepseek", stream: "streams/dsh-error.jsonl", done: true, failed: true, reason: "error",
			errors: []string{"LLM request failed: 401", "LLM request failed: 401"}, closeNever: true},
		{spec: "deepseek", stream: "streams/dsh-truncated.jsonl", finalPrefix: "partial", messages: 1, closeNever: true},
	}
}

// pick marks an id the test reads from the stream itself (the native json
// sample's call id is not worth hard-coding twice).
func pick(prefix string) string { return prefix + "*" }

func TestParsers(t *testing.T) {
	for _, tc := range parserCases() {
		t.Run(strings.TrimSuffix(tc.stream, ".jsonl"), func(t *testing.T) {
			in := fixedInput("x")
			in.Options = tc.opts
			stream := readStream(t, tc.stream)
			got, closeAt := feed(mustSpec(t, tc.spec).NewParser(in), stream)

			if got.Done != tc.done || got.Failed != tc.failed || got.TerminalReason != tc.reason {
				t.Errorf("done/failed/reason = %v/%v/%q, want %v/%v/%q", got.Done, got.Failed, got.TerminalReason, tc.done, tc.failed, tc.reason)
			}
			if !strings.HasPrefix(got.FinalText, tc.finalPrefix) || (tc.finalPrefix == "" && got.FinalText != "") {
				t.Errorf("final text %q, want prefix %q", got.FinalText, tc.finalPrefix)
			}
			if len(got.Messages) != tc.messages {
				t.Errorf("messages %q, want %d", got.Messages, tc.messages)
			}
			if !reflect.DeepEqual(got.MCPServers, tc.servers) {
				t.Errorf("mcp servers %v, want %v", got.MCPServers, tc.servers)
			}
			if !reflect.DeepEqual(got.LocalTools, tc.localTools) {
				t.Errorf("local tools %#v, want %#v", got.LocalTools, tc.localTools)
			}
			calls := got.ToolCalls
			for i := range tc.calls {
				if i < len(calls) && strings.HasSuffix(tc.calls[i].ID, "*") && strings.HasPrefix(calls[i].ID, strings.TrimSuffix(tc.calls[i].ID, "*")) {
					tc.calls[i].ID = calls[i].ID
				}
			}
			if !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("tool calls %+v, want %+v", calls, tc.calls)
			}
			if !reflect.DeepEqual(got.Usage, tc.usage) {
				t.Errorf("usage %+v, want %+v", got.Usage, tc.usage)
			}
			if len(got.Errors) != len(tc.errors) {
				t.Errorf("errors %q, want %d matching %q", got.Errors, len(tc.errors), tc.errors)
			} else {
				for i, want := range tc.errors {
					if !strings.Contains(got.Errors[i], want) {
						t.Errorf("error %d = %q, want it to contain %q", i, got.Errors[i], want)
					}
				}
			}
			if len(got.Warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", got.Warnings, tc.warnings)
			}
			switch {
			case tc.closeNever && closeAt >= 0:
				t.Errorf("CloseStdin at line %d, want never", closeAt)
			case tc.closeAtLast && closeAt != lineCount(stream)-1:
				t.Errorf("CloseStdin at line %d, want the last line %d", closeAt, lineCount(stream)-1)
			}
		})
	}
}

// TestParsersIgnoreGarbage interleaves noise a CLI may print on stdout (a
// warning, a partial line, JSON that is not an event) into every stream: the
// outcome must not change.
func TestParsersIgnoreGarbage(t *testing.T) {
	noise := [][]byte{
		[]byte("warning: something on stdout"),
		[]byte(""),
		[]byte("{\"type\":\"result\",\"is_err"),
		[]byte("[1,2,3]"),
		[]byte("null"),
		[]byte("{}"),
		[]byte("{\"type\":42}"),
		[]byte("\x00\xff binary"),
	}
	for _, tc := range parserCases() {
		t.Run(strings.TrimSuffix(tc.stream, ".jsonl"), func(t *testing.T) {
			in := fixedInput("x")
			in.Options = tc.opts
			stream := readStream(t, tc.stream)
			clean, _ := feed(mustSpec(t, tc.spec).NewParser(in), stream)

			var noisy [][]byte
			for i, line := range bytes.Split(stream, []byte("\n")) {
				noisy = append(noisy, noise[i%len(noise)], append(line, '\r'))
			}
			dirty, _ := feed(mustSpec(t, tc.spec).NewParser(in), bytes.Join(noisy, []byte("\n")))
			if !reflect.DeepEqual(clean, dirty) {
				t.Errorf("noise changed the outcome:\nclean %+v\ndirty %+v", clean, dirty)
			}
		})
	}
}

// TestTruncatedSamplesAreNotDone cuts every real sample before its terminal
// event: a stream that stops early is never done, whatever came before.
func TestTruncatedSamplesAreNotDone(t *testing.T) {
	for _, tc := range parserCases() {
		if !strings.HasPrefix(tc.stream, "samples/") {
			continue
		}
		t.Run(tc.stream, func(t *testing.T) {
			in := fixedInput("x")
			in.Options = tc.opts
			lines := bytes.Split(bytes.TrimRight(readStream(t, tc.stream), "\n"), []byte("\n"))
			// Drop the terminal line(s): Claude's result, Codex's
			// turn.completed, Pi's agent_end + agent_settled.
			keep := len(lines) - 1
			if tc.spec == "pi" {
				keep = len(lines) - 2
			}
			got, closeAt := feed(mustSpec(t, tc.spec).NewParser(in), bytes.Join(lines[:keep], []byte("\n")))
			if got.Done || got.TerminalReason != "" || closeAt >= 0 {
				t.Errorf("truncated stream: done=%v reason=%q closeAt=%d", got.Done, got.TerminalReason, closeAt)
			}
		})
	}
}

// TestOutcomeIsASnapshot: an Outcome taken mid-stream does not change when
// more lines arrive.
func TestOutcomeIsASnapshot(t *testing.T) {
	p := mustSpec(t, "claude-code").NewParser(fixedInput("claude"))
	lines := bytes.Split(readStream(t, "samples/claude.jsonl"), []byte("\n"))
	p.Feed(lines[0])
	p.Feed(lines[1])
	mid := p.Outcome()
	midCalls := append([]ToolCall(nil), mid.ToolCalls...)
	for _, l := range lines[2:] {
		p.Feed(l)
	}
	if mid.Done || !reflect.DeepEqual(mid.ToolCalls, midCalls) || mid.ToolCalls[0].Status != CallStarted {
		t.Errorf("mid-stream outcome changed: %+v", mid)
	}
	if end := p.Outcome(); !end.Done || end.ToolCalls[0].Status != CallCompleted {
		t.Errorf("final outcome %+v", end)
	}
}

func TestPiWillRetryIsNotTerminal(t *testing.T) {
	p := mustSpec(t, "pi").NewParser(fixedInput("pi"))
	stream := strings.Join([]string{
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}`,
		`{"type":"agent_end","willRetry":true}`,
	}, "\n")
	got, closeAt := feed(p, []byte(stream))
	if got.Done || closeAt >= 0 {
		t.Fatalf("willRetry ended the turn: %+v", got)
	}
	got, _ = feed(p, []byte(strings.Join([]string{
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}`,
		`{"type":"agent_end"}`,
	}, "\n")))
	if !got.Done || got.Failed || got.FinalText != "ok" || len(got.Errors) != 1 {
		t.Errorf("after the retry: %+v", got)
	}
}

func TestPiSettledWithoutAnswerFails(t *testing.T) {
	got, closeAt := feed(mustSpec(t, "pi").NewParser(fixedInput("pi")), []byte(`{"type":"agent_settled","aborted":false}`))
	if !got.Done || !got.Failed || closeAt != 0 {
		t.Errorf("settled with no assistant message: %+v closeAt=%d", got, closeAt)
	}
	got, _ = feed(mustSpec(t, "pi").NewParser(fixedInput("pi")), []byte(`{"type":"agent_settled","aborted":true}`))
	if !got.Failed || got.TerminalReason != "aborted" {
		t.Errorf("aborted: %+v", got)
	}
}

func TestDshTurnEndKinds(t *testing.T) {
	for _, tc := range []struct {
		line           string
		failed         bool
		reason, errMsg string
	}{
		{`{"type":"turn/end","data":{"reason":{"kind":"completed"}}}`, false, "completed", ""},
		{`{"method":"session.event","params":{"type":"turn/end","data":{"reason":{"kind":"completed"}}}}`, false, "completed", ""},
		{`{"type":"turn/end","data":{"reason":{"kind":"error","failure":{"message":"boom"}}}}`, true, "error", "boom"},
		{`{"type":"turn/end","data":{"reason":{"kind":"aborted"}}}`, true, "aborted", "turn ended: aborted"},
		{`{"type":"turn/end","data":{"reason":{"kind":"interrupted"}}}`, true, "interrupted", "turn ended: interrupted"},
		{`{"type":"turn/end","data":{"reason":{"kind":"blocked"}}}`, true, "blocked", "turn ended: blocked"},
		{`{"type":"turn/end","data":{}}`, true, "unknown", "without reason.kind"},
	} {
		got, _ := feed(mustSpec(t, "deepseek").NewParser(fixedInput("dsh")), []byte(tc.line))
		if !got.Done || got.Failed != tc.failed || got.TerminalReason != tc.reason {
			t.Errorf("%s: %+v", tc.line, got)
		}
		if tc.errMsg != "" && (len(got.Errors) != 1 || !strings.Contains(got.Errors[0], tc.errMsg)) {
			t.Errorf("%s: errors %q, want %q", tc.line, got.Errors, tc.errMsg)
		}
	}
	// Other notifications are not session events.
	got, _ := feed(mustSpec(t, "deepseek").NewParser(fixedInput("dsh")),
		[]byte(`{"method":"session.status","params":{"type":"turn/end","data":{"reason":{"kind":"completed"}}}}`))
	if got.Done {
		t.Error("a session.status notification ended the turn")
	}
}
