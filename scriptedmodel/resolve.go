package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Via values say how a step's tool was found among the offered tools.
const (
	ViaExact          = "exact"             // the canonical name, flat
	ViaPortable       = "portable"          // dots to underscores, flat
	ViaMCPPrefixed    = "mcp-prefixed"      // mcp__<server>__<name>
	ViaCodexNamespace = "codex-namespace"   // namespace mcp__<server>, name <name>
	ViaPiAdapter      = "pi-adapter-direct" // <server>_<name>
	ViaPiAdapterProxy = "pi-adapter-proxy"  // mcp({tool, args})
	ViaCodexCodeMode  = "codex-code-mode"   // exec with JavaScript
	ViaLocal          = "local"             // a local step, by its exact name
	ViaNotOffered     = "not-offered"       // no route: best-guess name
)

// defaultNamespace is the OpenAI Responses namespace of plain function tools: a tool
// in it is called exactly as a flat one.
const defaultNamespace = "functions"

// offeredTool is one tool a request offers the model, named as the harness names it.
type offeredTool struct {
	Name      string
	Namespace string // a Responses namespace; "" for a flat tool
	// Custom marks a Responses freeform tool (its input is text, not JSON).
	Custom bool
	// ArgsString marks a proxy tool whose schema types "args" as a string (some
	// pi-mcp-adapter versions take the nested arguments as JSON text).
	ArgsString bool
}

// display is the name the request log shows: namespaced tools are joined with "__",
// the way Codex itself exposes them to code mode (mcp__sharedos + echo →
// mcp__sharedos__echo), so a strict-policy check can use one prefix test for all.
func (t offeredTool) display() string {
	if t.Namespace == "" || t.Namespace == defaultNamespace {
		return t.Name
	}
	return t.Namespace + "__" + t.Name
}

func (t offeredTool) flat() bool { return t.Namespace == "" || t.Namespace == defaultNamespace }

// call is what the model emits for one step.
type call struct {
	Name      string
	Namespace string
	// Custom calls (Codex freeform tools) carry Input; the others carry Args.
	Custom  bool
	Args    json.RawMessage
	Input   string
	Via     string
	Offered bool
}

// portable is a canonical name in the character set model APIs allow in tool names
// (the bridge maps a unique portable name back to its canonical tool).
func portable(name string) string { return strings.ReplaceAll(name, ".", "_") }

// jsIdent is the identifier Codex code mode exposes a nested tool under: anything
// outside [A-Za-z0-9_$] becomes "_".
func jsIdent(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// resolve finds the harness-facing call for a step among the offered tools, in the
// order the package documentation gives.
func resolve(st Step, offered []offeredTool, server string) call {
	args := st.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	find := func(ok func(offeredTool) bool) (offeredTool, bool) {
		for _, t := range offered {
			if ok(t) {
				return t, true
			}
		}
		return offeredTool{}, false
	}
	flatNamed := func(name string) func(offeredTool) bool {
		return func(t offeredTool) bool { return t.flat() && t.Name == name }
	}
	direct := func(t offeredTool, via string) call {
		c := call{Name: t.Name, Namespace: t.Namespace, Args: args, Via: via, Offered: true}
		if t.Custom {
			c.Custom, c.Input = true, customInput(args)
		}
		return c
	}

	if st.Local {
		if t, ok := find(flatNamed(st.Tool)); ok {
			return direct(t, ViaLocal)
		}
		return call{Name: st.Tool, Args: args, Via: ViaLocal}
	}

	canon, port := st.Tool, portable(st.Tool)
	prefix := "mcp__" + server
	for _, c := range []struct{ name, via string }{
		{canon, ViaExact},
		{port, ViaPortable},
		{prefix + "__" + port, ViaMCPPrefixed},
		{prefix + "__" + canon, ViaMCPPrefixed},
	} {
		if t, ok := find(flatNamed(c.name)); ok {
			return direct(t, c.via)
		}
	}
	if t, ok := find(func(t offeredTool) bool {
		return t.Namespace == prefix && (t.Name == canon || t.Name == port)
	}); ok {
		return direct(t, ViaCodexNamespace)
	}
	for _, name := range []string{server + "_" + port, server + "_" + canon} {
		if t, ok := find(flatNamed(name)); ok {
			return direct(t, ViaPiAdapter)
		}
	}
	if t, ok := find(func(t offeredTool) bool { return t.flat() && t.Name == "mcp" && !t.Custom }); ok {
		var nested any = args
		if t.ArgsString {
			nested = string(args)
		}
		proxied, _ := json.Marshal(map[string]any{"tool": server + "_" + port, "args": nested})
		return call{Name: t.Name, Namespace: t.Namespace, Args: proxied, Via: ViaPiAdapterProxy, Offered: true}
	}
	if t, ok := find(func(t offeredTool) bool { return t.flat() && t.Name == "exec" && t.Custom }); ok {
		// The same shape Codex accepted from the reference fake: await the nested tool,
		// then hand its result back as the exec output.
		js := fmt.Sprintf("const r = await tools.%s(%s);\ntext(JSON.stringify(r));", jsIdent(prefix+"__"+port), args)
		return call{Name: t.Name, Namespace: t.Namespace, Custom: true, Input: js, Via: ViaCodexCodeMode, Offered: true}
	}
	return call{Name: prefix + "__" + port, Args: args, Via: ViaNotOffered}
}

// customInput is the text a local step sends to a freeform tool: its "input"
// argument when that is a string (apply_patch's patch), else the arguments' JSON.
func customInput(args json.RawMessage) string {
	var obj struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal(args, &obj) == nil && obj.Input != nil {
		return *obj.Input
	}
	return string(args)
}
