package harnessspec

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// decodeLine unmarshals one JSONL line into v. Blank lines, non-JSON noise
// (a CLI's stray warning on stdout) and non-object values report false so the
// parsers ignore them instead of failing the turn.
func decodeLine(line []byte, v any) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	return json.Unmarshal(line, v) == nil
}

// outcome accumulates what a stream says; each parser embeds one and
// translates its own events into these calls.
type outcome struct {
	o     Outcome
	calls map[string]int // tool call id → index in o.ToolCalls
}

func (a *outcome) message(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	a.o.Messages = append(a.o.Messages, text)
	a.o.FinalText = text
}

func (a *outcome) errorf(msg string) {
	if msg = strings.TrimSpace(msg); msg != "" {
		a.o.Errors = append(a.o.Errors, msg)
	}
}

func (a *outcome) warn(msg string) {
	if msg = strings.TrimSpace(msg); msg != "" {
		a.o.Warnings = append(a.o.Warnings, msg)
	}
}

func (a *outcome) addUsage(in, out int64) {
	if a.o.Usage == nil {
		a.o.Usage = &Usage{}
	}
	a.o.Usage.InputTokens += in
	a.o.Usage.OutputTokens += out
}

// call records a tool call or updates the one with the same id. Empty fields
// of an update keep what an earlier event said (a start names the tool, an end
// may only carry the status).
func (a *outcome) call(c ToolCall) {
	if a.calls == nil {
		a.calls = map[string]int{}
	}
	if i, ok := a.calls[c.ID]; ok && c.ID != "" {
		prev := &a.o.ToolCalls[i]
		if c.Name != "" {
			prev.Name = c.Name
		}
		if c.Server != "" {
			prev.Server, prev.Tool = c.Server, c.Tool
		}
		if c.Status != "" {
			prev.Status = c.Status
		}
		return
	}
	a.calls[c.ID] = len(a.o.ToolCalls)
	a.o.ToolCalls = append(a.o.ToolCalls, c)
}

// finish marks the stream as having reached a terminal event.
func (a *outcome) finish(failed bool, reason string) {
	a.o.Done = true
	a.o.Failed = a.o.Failed || failed
	a.o.TerminalReason = reason
}

// snapshot returns a copy the caller may keep while feeding continues.
func (a *outcome) snapshot() Outcome {
	o := a.o
	o.Messages = append([]string(nil), o.Messages...)
	o.MCPServers = append([]ServerStatus(nil), o.MCPServers...)
	if a.o.LocalTools != nil {
		o.LocalTools = append([]string{}, o.LocalTools...)
	}
	o.ToolCalls = append([]ToolCall(nil), o.ToolCalls...)
	o.Errors = append([]string(nil), o.Errors...)
	o.Warnings = append([]string(nil), o.Warnings...)
	if a.o.Usage != nil {
		u := *a.o.Usage
		o.Usage = &u
	}
	return o
}

// splitMCPName splits the "mcp__<server>__<tool>" naming Claude, Pi (native)
// and dsh use for MCP tools.
func splitMCPName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, "mcp__")
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// localTools keeps the reported tools that the sharedos MCP server does not
// serve: the harness's own surface. Never nil, so "reported, none" differs
// from "not reported".
func localTools(reported []string) []string {
	out := []string{}
	for _, t := range reported {
		if server, _, ok := splitMCPName(t); ok && server == mcpServerName {
			continue
		}
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
