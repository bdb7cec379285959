package harnessspec

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Codex 0.171.0 (@openai/codex, `codex exec --json`).
//
// Honesty flags (harnesses.md):
//   - --ephemeral --ignore-user-config --strict-config and a private
//     CODEX_HOME: no session files, nothing from the machine's config.
//   - mcp_servers.sharedos.required=true: a run whose bridge failed stops
//     before any model call (Codex reports no MCP status otherwise).
//   - default_tools_approval_mode="approve": exec runs with approval
//     "never", so a tool without readOnlyHint would be refused inside Codex
//     and the kernel never consulted.
//   - bearer_token_env_var, never an inline token (Codex rejects it anyway).
//   - -s read-only and --disable shell_tool/view_image/multi_agent/goals/
//     plugins, web_search disabled, request_user_input off: the smallest
//     local surface Codex allows. plugins also stops a github.com lookup.
//   - retries off and --disable unbounded_connection_retries: a dead model
//     endpoint fails the turn instead of being retried forever.
func codex() Spec {
	return Spec{
		ID:        "codex",
		Label:     "Codex",
		Probe:     defaultProbe("codex"),
		ModelAPI:  APIOpenAIResponses, // wire_api=responses; chat is no longer supported
		Launch:    codexLaunch,
		NewParser: func(LaunchInput) Parser { return &codexParser{} },
	}
}

// Codex's local tools under this launch. In function mode the request offers
// the MCP-resource tools next to the catalogue namespace (they reach only
// configured MCP servers, i.e. the bridge); in code mode the tools live inside
// a JavaScript `exec` tool and apply_patch cannot be switched off (-s
// read-only refuses its writes). Declared, since Codex's stream does not list
// them.
func codexFunctionModeTools() []string {
	return []string{"list_mcp_resource_templates", "list_mcp_resources", "read_mcp_resource"}
}

func codexCodeModeTools() []string { return []string{"apply_patch", "exec"} }

// codexCatalogModel matches model ids from Codex's own catalogue, for which
// Codex switches to code mode (seen with gpt-6.2-sol in the probe runs).
// This is a heuristic: Codex decides from its bundled model metadata, which
// this package cannot read.
var codexCatalogModel = regexp.MustCompile(`^(gpt-|codex-|o[0-9])`)

func codexCodeMode(modelID string) bool {
	return modelID == "" || codexCatalogModel.MatchString(modelID)
}

// tomlString quotes s as a TOML basic string: `-c key=value` parses value as
// TOML, and quoting every string avoids relying on Codex's fallback of
// treating unparsable values as literal strings.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func codexLaunch(in LaunchInput) (Launch, error) {
	s := codex()
	if err := validate(s.ID, in); err != nil {
		return Launch{}, err
	}
	if _, err := s.ResolveOptions(in.Options); err != nil {
		return Launch{}, err
	}
	srv := "mcp_servers." + mcpServerName + "."
	c := func(key, value string) []string { return []string{"-c", key + "=" + value} }
	argv := []string{in.Executable, "exec", "--json", "--ephemeral", "--skip-git-repo-check", "--ignore-user-config", "--strict-config"}
	argv = append(argv, c(srv+"url", tomlString(in.BridgeURL))...)
	argv = append(argv, c(srv+"bearer_token_env_var", tomlString(in.TokenEnv))...)
	argv = append(argv, c(srv+"required", "true")...)
	argv = append(argv, c(srv+"default_tools_approval_mode", tomlString("approve"))...)
	argv = append(argv, "-s", "read-only")
	argv = append(argv, c("approval_policy", tomlString("never"))...)
	for _, f := range []string{"shell_tool", "view_image", "multi_agent", "goals", "plugins"} {
		argv = append(argv, "--disable", f)
	}
	argv = append(argv, c("web_search", tomlString("disabled"))...)
	argv = append(argv, c("tools.experimental_request_user_input.enabled", "false")...)
	// Codex 0.171 exports OTel metrics to its own host whenever a network path
	// exists (seen as a refused CONNECT ab.chatgpt.com:443 on every live-provider
	// turn): off, so a clean run leaves a clean violation log.
	argv = append(argv, c("analytics.enabled", "false")...)

	var envFrom map[string]string
	if in.Model.BaseURL != "" {
		p := "model_providers." + customModelProviderID + "."
		argv = append(argv, c("model_provider", tomlString(customModelProviderID))...)
		argv = append(argv, c(p+"name", tomlString(customModelProviderID))...)
		argv = append(argv, c(p+"base_url", tomlString(modelRoot(in.Model.BaseURL)+"/v1"))...)
		if in.Model.APIKeyEnv != "" {
			argv = append(argv, c(p+"env_key", tomlString(in.Model.APIKeyEnv))...)
		}
		argv = append(argv, c(p+"wire_api", tomlString("responses"))...)
		argv = append(argv, c(p+"request_max_retries", "0")...)
		argv = append(argv, c(p+"stream_max_retries", "0")...)
	} else if in.Model.APIKeyEnv != "" && in.Model.APIKeyEnv != "OPENAI_API_KEY" {
		envFrom = map[string]string{"OPENAI_API_KEY": in.Model.APIKeyEnv}
	}
	if in.Model.ID != "" {
		argv = append(argv, c("model", tomlString(in.Model.ID))...)
	}
	argv = append(argv, "--disable", "unbounded_connection_retries")
	argv = append(argv, in.ExtraArgs...)
	argv = append(argv, promptArgs(in.Prompt)...)

	codexHome := filepath.Join(in.Home, ".codex")
	var warnings []string
	if strings.HasPrefix(filepath.Clean(codexHome)+"/", "/tmp/") {
		warnings = append(warnings, "CODEX_HOME "+codexHome+" is under /tmp: Codex skips its helper aliases there (it still runs); put the scratch dir elsewhere")
	}
	local, naming := codexFunctionModeTools(), "function_call name <tool> in namespace mcp__sharedos"
	if codexCodeMode(in.Model.ID) {
		local, naming = codexCodeModeTools(), "code mode: tools.mcp__sharedos__<tool>(…) inside the exec tool's JavaScript"
	}
	return Launch{
		Argv:               argv,
		Env:                map[string]string{"CODEX_HOME": codexHome},
		EnvFrom:            envFrom,
		Dirs:               []string{codexHome},
		Stdin:              StdinPlan{Mode: StdinDevNull}, // an open stdin blocks codex exec
		MCPSupport:         MCPNative,
		DeclaredLocalTools: local,
		ToolNaming:         naming,
		Warnings:           warnings,
	}, nil
}

// codexParser reads `codex exec --json`: thread.started, turn.started,
// item.started/item.completed, then turn.completed or turn.failed.
type codexParser struct{ outcome }

type codexEvent struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Usage *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Item *struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Message string          `json:"message"`
		Server  string          `json:"server"`
		Tool    string          `json:"tool"`
		Status  string          `json:"status"`
		Error   json.RawMessage `json:"error"`
	} `json:"item"`
}

func (p *codexParser) Feed(line []byte) Signal {
	var e codexEvent
	if !decodeLine(line, &e) {
		return Signal{}
	}
	switch e.Type {
	case "item.started", "item.updated", "item.completed":
		if e.Item == nil {
			return Signal{}
		}
		it := e.Item
		switch it.Type {
		case "agent_message":
			if e.Type == "item.completed" {
				p.message(it.Text)
			}
		case "error":
			// Non-fatal notices (e.g. missing model metadata); a fatal error
			// ends in turn.failed.
			p.warn(it.Message)
		case "mcp_tool_call":
			p.call(ToolCall{ID: it.ID, Name: it.Tool, Server: it.Server, Tool: it.Tool, Status: codexStatus(it.Status, it.Error)})
		case "command_execution", "file_change", "web_search":
			// Harness-local actions: recorded so an escape attempt is visible.
			p.call(ToolCall{ID: it.ID, Name: it.Type, Status: codexStatus(it.Status, it.Error)})
		}
	case "turn.completed":
		if e.Usage != nil {
			p.addUsage(e.Usage.InputTokens, e.Usage.OutputTokens)
		}
		p.finish(false, "turn.completed")
	case "turn.failed":
		if e.Error != nil {
			p.errorf(e.Error.Message)
		}
		p.finish(true, "turn.failed")
	case "error":
		// Stream-level errors (reconnects, a failed request) precede
		// turn.failed; alone they do not end the turn.
		p.errorf(e.Message)
	}
	return Signal{}
}

func codexStatus(status string, errField json.RawMessage) string {
	if len(errField) > 0 && string(errField) != "null" {
		return CallFailed
	}
	switch status {
	case "completed":
		return CallCompleted
	case "failed", "declined":
		return CallFailed
	default:
		return CallStarted
	}
}

func (p *codexParser) Outcome() Outcome { return p.snapshot() }
