package harnessspec

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// Claude Code 2.1.332 (@anthropic-ai/claude-code, a native binary).
//
// Honesty flags, each for a reason seen in the probe runs (harnesses.md):
//   - --tools "" removes every built-in tool; a deny-list leaks Glob, Grep,
//     Task*, ToolSearch… and with built-ins present MCP tools hide behind
//     ToolSearch.
//   - --allowedTools mcp__sharedos with --permission-mode dontAsk: without
//     them Claude refuses the call itself and the kernel is never consulted.
//   - --mcp-config FILE --strict-mcp-config: only the bridge, never the
//     machine's own MCP servers. "type":"http" is mandatory in the file;
//     without it the server is dropped silently.
//   - --no-session-persistence: nothing written beyond the turn.
//
// The init line of stream-json lists the tools Claude actually offers the
// model, so the local tool surface is measured, not declared.
func claudeCode() Spec {
	return Spec{
		ID:        "claude-code",
		Label:     "Claude Code",
		Probe:     defaultProbe("claude"),
		ModelAPI:  APIAnthropicMessages,
		Launch:    claudeLaunch,
		NewParser: func(LaunchInput) Parser { return &claudeParser{} },
	}
}

// claudeQuietEnv keeps Claude off every host but the bridge and the model
// (checked with strace in the probe runs; without it Claude resolves
// api.anthropic.com). CLAUDE_CODE_MAX_RETRIES=0 fails fast on a dead model.
func claudeQuietEnv() [][2]string {
	return [][2]string{
		{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
		{"DISABLE_TELEMETRY", "1"},
		{"DISABLE_AUTOUPDATER", "1"},
		{"DISABLE_ERROR_REPORTING", "1"},
		{"DISABLE_UPDATES", "1"},
		{"DISABLE_GROWTHBOOK", "1"},
		{"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1"},
		{"CLAUDE_CODE_MAX_RETRIES", "0"},
	}
}

func claudeLaunch(in LaunchInput) (Launch, error) {
	s := claudeCode()
	if err := validate(s.ID, in); err != nil {
		return Launch{}, err
	}
	if _, err := s.ResolveOptions(in.Options); err != nil {
		return Launch{}, err
	}
	// Field order as harnesses.md writes the config, so a dry-run reads the same.
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	}
	cfg := map[string]any{"mcpServers": map[string]server{mcpServerName: {
		Type: "http", URL: in.BridgeURL, Headers: map[string]string{"Authorization": bearerRef(in.TokenEnv)},
	}}}
	content, err := json.Marshal(cfg)
	if err != nil {
		return Launch{}, err
	}
	cfgPath := filepath.Join(in.Home, ".sharedos", "claude-mcp.json")

	argv := []string{in.Executable, "-p"}
	prompt := promptArgs(in.Prompt)
	if len(prompt) == 1 {
		argv = append(argv, prompt...) // the shape harnesses.md shows: -p <prompt> …
	}
	argv = append(argv,
		"--output-format", "stream-json", "--verbose", "--no-session-persistence",
		"--mcp-config", cfgPath, "--strict-mcp-config",
		"--tools", "", "--allowedTools", "mcp__"+mcpServerName, "--permission-mode", "dontAsk")
	if in.Model.ID != "" {
		argv = append(argv, "--model", in.Model.ID)
	}
	argv = append(argv, in.ExtraArgs...)
	if len(prompt) == 2 {
		argv = append(argv, prompt...) // "-…" prompt: after "--", at the end
	}

	env := map[string]string{}
	for _, kv := range claudeQuietEnv() {
		env[kv[0]] = kv[1]
	}
	if in.Model.BaseURL != "" {
		// Claude appends /v1/messages?beta=true itself.
		env["ANTHROPIC_BASE_URL"] = modelRoot(in.Model.BaseURL)
	}
	var envFrom map[string]string
	switch in.Model.APIKeyEnv {
	case "", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN":
		// Claude reads these names itself; the launcher passes them as they are.
	default:
		envFrom = map[string]string{"ANTHROPIC_API_KEY": in.Model.APIKeyEnv} // sent as x-api-key
	}

	return Launch{
		Argv:               argv,
		Env:                env,
		EnvFrom:            envFrom,
		Dirs:               []string{filepath.Dir(cfgPath)},
		Files:              []File{{Path: cfgPath, Mode: 0o600, Content: append(content, '\n')}},
		Stdin:              StdinPlan{Mode: StdinDevNull}, // an open stdin delays Claude by 3 s
		MCPSupport:         MCPNative,
		DeclaredLocalTools: []string{}, // --tools "" leaves none
		LocalToolsMeasured: true,
		ToolNaming:         "mcp__sharedos__<tool> (a dotted catalogue name may reach the model with '_' for '.')",
	}, nil
}

// claudeParser reads --output-format stream-json: a system/init line (tools,
// mcp_servers), assistant and user messages, and a final result line.
type claudeParser struct{ outcome }

type claudeLine struct {
	Type       string   `json:"type"`
	Subtype    string   `json:"subtype"`
	Tools      []string `json:"tools"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
	Message struct {
		Content []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		} `json:"content"`
	} `json:"message"`
	// result line
	IsError           bool            `json:"is_error"`
	Result            string          `json:"result"`
	TerminalReason    string          `json:"terminal_reason"`
	Errors            []string        `json:"errors"`
	PermissionDenials json.RawMessage `json:"permission_denials"`
	Usage             *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
}

func (p *claudeParser) Feed(line []byte) Signal {
	var l claudeLine
	if !decodeLine(line, &l) {
		return Signal{}
	}
	switch l.Type {
	case "system":
		if l.Subtype != "init" {
			return Signal{}
		}
		p.o.LocalTools = localTools(l.Tools)
		p.o.MCPServers = p.o.MCPServers[:0]
		for _, s := range l.MCPServers {
			p.o.MCPServers = append(p.o.MCPServers, ServerStatus{Name: s.Name, Status: s.Status})
			if s.Status != "connected" {
				p.errorf("MCP server " + s.Name + ": " + s.Status)
			}
		}
	case "assistant":
		var texts []string
		for _, c := range l.Message.Content {
			switch c.Type {
			case "text":
				texts = append(texts, c.Text)
			case "tool_use":
				call := ToolCall{ID: c.ID, Name: c.Name, Status: CallStarted}
				if server, tool, ok := splitMCPName(c.Name); ok {
					call.Server, call.Tool = server, tool
				}
				p.call(call)
			}
		}
		p.message(strings.Join(texts, ""))
	case "user":
		for _, c := range l.Message.Content {
			if c.Type == "tool_result" && c.ToolUseID != "" {
				status := CallCompleted
				if c.IsError {
					status = CallFailed
				}
				p.call(ToolCall{ID: c.ToolUseID, Status: status})
			}
		}
	case "result":
		// The result line is terminal. is_error or a non-success subtype
		// (error_max_turns, error_during_execution) is a failed turn whatever
		// the exit code says.
		failed := l.IsError || (l.Subtype != "" && l.Subtype != "success")
		reason := l.TerminalReason
		if reason == "" {
			reason = l.Subtype
		}
		if strings.TrimSpace(l.Result) != "" {
			p.o.FinalText = l.Result
		}
		if failed {
			p.errorf(l.Result)
		}
		for _, e := range l.Errors {
			p.errorf(e)
		}
		var denials []struct {
			ToolName string `json:"tool_name"`
		}
		if json.Unmarshal(l.PermissionDenials, &denials) == nil {
			for _, d := range denials {
				p.warn("permission denied inside Claude: " + d.ToolName)
			}
		}
		if l.Usage != nil {
			p.addUsage(l.Usage.InputTokens, l.Usage.OutputTokens)
		}
		p.finish(failed, reason)
	}
	return Signal{}
}

func (p *claudeParser) Outcome() Outcome { return p.snapshot() }
