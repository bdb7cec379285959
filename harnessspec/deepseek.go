package harnessspec

import (
	"encoding/json"
	"path/filepath"
	"strings"
)

// DeepSeek Harness (`dsh`). Not installable from the registry today (its
// release candidates do not resolve), so this spec is tested against the fake
// in testdata/fake-dsh; without dsh the harness is reported not available.
//
//	dsh --profile headless --patch <Home>/cordis.patch.yml <prompt>
//
// The MCP client is a cordis plugin activated by the patch file. The
// `insert:` form is mandatory: a bare `id:` entry only overrides an existing
// plugin, and dsh then warns `patch: entry "…" not found` and boots without
// the client. failOnStartupError makes a dead bridge stop the run instead of
// leaving a harness without its catalogue.
//
// The headless profile keeps dsh's own shell and apply_patch tools, so both
// are declared; dsh's stream does not list its tools.
func deepseek() Spec {
	return Spec{
		ID:    "deepseek",
		Label: "DeepSeek Harness",
		Probe: func() ProbeSpec {
			p := defaultProbe("dsh")
			p.InstallHint = "DeepSeek Harness is not published in an installable form (@deepseek-ai/dsh exists only as release candidates whose dependencies do not resolve); put a dsh on PATH to use it"
			return p
		}(),
		// DeepSeek's API is Chat Completions compatible. harnesses.md names no
		// dsh flag or variable for a custom endpoint, so this spec does not set
		// one (see the warning Launch adds).
		ModelAPI:  APIOpenAICompletions,
		Launch:    deepseekLaunch,
		NewParser: func(LaunchInput) Parser { return &dshParser{} },
	}
}

const (
	dshPatchName     = "cordis.patch.yml"
	dshMCPClient     = "@deepseek-ai/dsh-mcp-client"
	dshToolTimeoutMs = "120000"
)

// dshPatch renders the patch file exactly in the shape harnesses.md gives.
// YAML double-quoted scalars take the same escapes as TOML basic strings, so
// a URL with a quote or backslash cannot break the document.
func dshPatch(bridgeURL, tokenEnv string) []byte {
	lines := []string{
		"- insert:",
		"    - id: mcp-" + mcpServerName,
		"      name: '" + dshMCPClient + "'",
		"      config:",
		"        serverName: " + mcpServerName,
		"        transport: streamable-http",
		"        url: " + tomlString(bridgeURL),
		"        headers:",
		"          Authorization: " + tomlString(bearerRef(tokenEnv)),
		"        failOnStartupError: true",
		"        toolCallTimeoutMs: " + dshToolTimeoutMs,
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func deepseekLaunch(in LaunchInput) (Launch, error) {
	s := deepseek()
	if err := validate(s.ID, in); err != nil {
		return Launch{}, err
	}
	if _, err := s.ResolveOptions(in.Options); err != nil {
		return Launch{}, err
	}
	patchPath := filepath.Join(in.Home, dshPatchName)
	argv := []string{in.Executable, "--profile", "headless", "--patch", patchPath}
	argv = append(argv, in.ExtraArgs...)
	argv = append(argv, promptArgs(in.Prompt)...)

	// A patch activates a plugin, it does not fetch one: the client must be
	// installed into the headless profile first, which this package cannot do
	// (it starts no processes) and a fresh HOME does not have.
	warnings := []string{"dsh needs " + dshMCPClient + " installed into its headless profile (dsh plugin --profile headless add " + dshMCPClient + "); the patch only activates it"}
	if in.Model.ID != "" || in.Model.BaseURL != "" {
		warnings = append(warnings, "dsh takes its model from the profile: the run's model settings are not applied to this launch")
	}
	return Launch{
		Argv:               argv,
		Env:                map[string]string{},
		Files:              []File{{Path: patchPath, Mode: 0o600, Content: dshPatch(in.BridgeURL, in.TokenEnv)}},
		Stdin:              StdinPlan{Mode: StdinDevNull},
		MCPSupport:         MCPExtension,
		MCPExtension:       dshMCPClient,
		DeclaredLocalTools: []string{"apply_patch", "shell"},
		ToolNaming:         "mcp__sharedos__<tool> (dsh-mcp-client names tools mcp__<serverName>__<tool>)",
		Warnings:           warnings,
	}, nil
}

// dshParser reads dsh session events: assistant/message, assistant/chunk,
// turn/end{reason.kind}, either bare ({"type":…,"data":…}) or wrapped in a
// JSON-RPC notification ({"method":"session.event","params":{"event":…}}).
type dshParser struct{ outcome }

type dshEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type dshLine struct {
	dshEvent
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// dshReason is turn/end's reason, and the reason of a finish chunk.
type dshReason struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
	Failure *struct {
		Message string `json:"message"`
	} `json:"failure"`
}

func (r dshReason) message() string {
	switch {
	case r.Error != nil && r.Error.Message != "":
		return r.Error.Message
	case r.Failure != nil && r.Failure.Message != "":
		return r.Failure.Message
	}
	return r.Message
}

func (p *dshParser) Feed(line []byte) Signal {
	var l dshLine
	if !decodeLine(line, &l) {
		return Signal{}
	}
	ev := l.dshEvent
	if l.Method != "" {
		if l.Method != "session.event" {
			return Signal{} // session.status and other notifications
		}
		// params is {"sessionId":…, "event":{…}} or the event itself.
		var wrapped struct {
			Event *dshEvent `json:"event"`
		}
		if json.Unmarshal(l.Params, &wrapped) == nil && wrapped.Event != nil {
			ev = *wrapped.Event
		} else if json.Unmarshal(l.Params, &ev) != nil {
			return Signal{}
		}
	}
	switch ev.Type {
	case "assistant/message":
		var d struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return Signal{}
		}
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		var text string
		if json.Unmarshal(d.Message.Content, &blocks) == nil {
			var texts []string
			for _, b := range blocks {
				if b.Type == "text" {
					texts = append(texts, b.Text)
				}
			}
			text = strings.Join(texts, "")
		} else {
			_ = json.Unmarshal(d.Message.Content, &text) // plain string content
		}
		p.message(text)
	case "assistant/chunk":
		var d struct {
			Chunk struct {
				Type   string    `json:"type"`
				Reason dshReason `json:"reason"`
			} `json:"chunk"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Chunk.Type == "finish" && d.Chunk.Reason.Kind == "error" {
			p.errorf(d.Chunk.Reason.message())
		}
	case "turn/end":
		var d struct {
			Reason *dshReason `json:"reason"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Reason == nil || d.Reason.Kind == "" {
			// A turn/end that does not say how it ended is not a success.
			p.errorf("dsh: turn/end without reason.kind")
			p.finish(true, "unknown")
			return Signal{}
		}
		// Only "completed" is a finished turn; error, aborted, interrupted
		// and blocked (waiting for an approval nobody will give) are not.
		failed := d.Reason.Kind != "completed"
		if failed {
			msg := d.Reason.message()
			if msg == "" {
				msg = "turn ended: " + d.Reason.Kind
			}
			p.errorf(msg)
		}
		p.finish(failed, d.Reason.Kind)
	}
	return Signal{}
}

func (p *dshParser) Outcome() Outcome { return p.snapshot() }
