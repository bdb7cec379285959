// Package harnessspec describes the coding-agent CLIs sharedos-run can launch
// (Claude Code, Codex, Pi, DeepSeek Harness) as data plus pure functions: the
// argv with its honesty flags, the config files to write into the run's scratch
// HOME, the environment, how the prompt and stdin are handled, the declared
// local tool surface, the availability probe, and a parser that judges the
// harness's output stream.
//
// The package starts no processes, reads no environment and imports none of
// the project's other packages: the launcher (which knows no harness by name)
// turns a Launch into a process and feeds the process's stdout to a Parser.
// The facts encoded here come from shared/spec/harnesses.md; each harness has a
// file of its own.
//
// Secrets never pass through this package. The bridge token and the model key
// are named by environment variable (LaunchInput.TokenEnv, Model.APIKeyEnv);
// config files reference them as ${VAR}/"$VAR", and a variable a CLI insists on
// by a fixed name is requested through Launch.EnvFrom, which the launcher fills
// from the run's environment.
package harnessspec

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Wire APIs a scripted model may have to speak (Spec.ModelAPI).
const (
	APIAnthropicMessages = "anthropic-messages"
	APIOpenAIResponses   = "openai-responses"
	APIOpenAICompletions = "openai-completions"
)

const (
	defaultProbeTimeout = 10 * time.Second
	mcpServerName       = "sharedos" // the one MCP server every launch configures
	// customModelProviderID names the provider entry Codex and Pi get for a
	// custom endpoint; distinct from every built-in provider id.
	customModelProviderID = "sharedos_model"
)

// MCP support kinds (Launch.MCPSupport), as the execution record names them.
const (
	MCPNative    = "native"
	MCPExtension = "extension"
)

// Spec describes one harness: everything the launcher needs, as data plus
// functions that build a launch and parse its output.
type Spec struct {
	ID    string // stable id: "claude-code", "codex", "pi", "deepseek"
	Label string // human name for tables and messages

	Probe ProbeSpec // how to tell whether the harness is installed

	// Options are the harness-specific choices a run may make (e.g. Pi's
	// MCP mode). Launch rejects names and values not listed here.
	Options []OptionSpec

	// ModelAPI is the wire API a scripted model must speak for this harness
	// with the launch built here: one of the API* constants.
	ModelAPI string

	// Launch builds the process description for one turn. It validates its
	// input and never starts anything.
	Launch func(in LaunchInput) (Launch, error)

	// NewParser returns a fresh parser for one turn's stdout, fed one line at
	// a time (without the trailing newline).
	NewParser func(in LaunchInput) Parser
}

// ProbeSpec says how to find the harness and ask for its version.
type ProbeSpec struct {
	// Executables are the file names to look for, in order: in the pinned
	// prefix's bin directories the launcher knows of, then on PATH.
	Executables []string
	// PrefixPath lists directories, relative to the pinned install prefix, to
	// put first on PATH when running the probe (and the harness): Pi 1.6's
	// launcher script needs the pinned Node 22, not the system's.
	PrefixPath []string
	// VersionArgs are appended to the executable to print its version.
	VersionArgs []string
	// ParseVersion extracts the version from the probe's output; an error
	// means the executable is not the harness (or is broken).
	ParseVersion func(stdout, stderr string) (string, error)
	// Timeout bounds the version call (10 s: a hanging CLI is "not available").
	Timeout time.Duration
	// InstallHint tells a user who lacks the harness how to get it.
	InstallHint string
}

// OptionSpec is one harness-specific launch option with a closed set of values.
type OptionSpec struct {
	Name    string
	Values  []string
	Default string
	Help    string
}

// Model is the model seat as the harness must address it.
type Model struct {
	ID       string // model id passed to the CLI ("" = the CLI's default)
	Provider string // provider name as the run knows it (informational for most specs)
	// BaseURL is the root of a custom endpoint as seen inside the sandbox,
	// without a trailing /v1 (e.g. http://127.0.0.1:PORT). Empty means the
	// CLI's own provider endpoint.
	BaseURL string
	// APIKeyEnv names the variable holding the model key (never the value).
	APIKeyEnv string
}

// LaunchInput is everything a spec needs to build one turn's launch.
type LaunchInput struct {
	Prompt      string
	ExecutionID string
	BridgeURL   string // http://127.0.0.1:P/mcp, as seen inside the sandbox
	TokenEnv    string // name of the variable holding the bridge's bearer token
	Home        string // absolute scratch HOME (same path inside and outside)
	WorkDir     string // absolute working directory of the harness; a scratch dir, not the workspace
	Executable  string // resolved path of the CLI (argv[0])
	Prefix      string // install prefix of the pinned harnesses ("" when found on PATH)
	Model       Model
	Options     map[string]string
	ExtraArgs   []string // passed through untouched, after the spec's own flags
}

// Launch is one turn's process description.
type Launch struct {
	Argv []string // Argv[0] is the executable
	// Env holds the spec's own variables. The launcher adds PATH, HOME,
	// TMPDIR, proxy variables, the token variable and the model key variable.
	Env map[string]string
	// EnvFrom maps a variable the CLI reads by a fixed name to the run
	// variable whose value the launcher copies into it (e.g.
	// ANTHROPIC_API_KEY from SHAREDOS_MODEL_KEY). Names only, never values.
	EnvFrom map[string]string
	// PathPrefix lists absolute directories to put first on PATH.
	PathPrefix []string
	// Dirs are absolute directories to create (0700) before the files.
	Dirs  []string
	Files []File
	Stdin StdinPlan

	MCPSupport          string // MCPNative or MCPExtension
	MCPExtension        string // the extension's package name, when MCPSupport is "extension"
	MCPExtensionVersion string // its pinned version, when known

	// DeclaredLocalTools is the harness-local tool surface this launch
	// leaves (sorted), for a strict ToolPolicy's harnessLocal check.
	DeclaredLocalTools []string
	// LocalToolsMeasured is true when the output stream reports the actual
	// local tools (Outcome.LocalTools); otherwise the declaration is all
	// there is.
	LocalToolsMeasured bool
	// ToolNaming documents how the model sees a catalogue tool.
	ToolNaming string
	// Warnings are facts about this launch the run should print and record
	// (e.g. a setting that could not be applied).
	Warnings []string
}

// File is a file to write before the harness starts.
type File struct {
	Path    string // absolute, under Home or WorkDir
	Mode    uint32 // permission bits
	Content []byte
}

// Stdin modes.
const (
	StdinDevNull = "devnull" // stdin is /dev/null: an open silent stdin blocks Codex and Pi, delays Claude
	StdinRPC     = "rpc"     // write Lines (each followed by "\n"), keep stdin open until Signal.CloseStdin
)

// StdinPlan says what the harness's stdin is.
type StdinPlan struct {
	Mode  string
	Lines [][]byte
}

// Parser judges one turn's output stream. It is not safe for concurrent use.
type Parser interface {
	// Feed takes one line of stdout (a trailing "\r" is tolerated). Lines
	// that are not JSON or not understood are ignored.
	Feed(line []byte) Signal
	// Outcome is what the stream said so far.
	Outcome() Outcome
}

// Signal tells the launcher what to do after a line.
type Signal struct {
	CloseStdin bool // the RPC conversation is over: close the harness's stdin
}

// Outcome is the parser's judgement of a stream. Exit codes lie; this does not
// look at them.
type Outcome struct {
	// Done is true once a terminal event was seen. A stream that never
	// reached one (crash, timeout, truncation) is not done.
	Done bool
	// Failed is true when the stream reports a failed turn (an error result,
	// turn.failed, stopReason "error", a turn/end whose kind is not
	// "completed", a refused prompt).
	Failed bool
	// TerminalReason is the harness's own word for how the turn ended
	// (e.g. "completed", "turn.failed", "stop", "error"); "" when not done.
	TerminalReason string
	FinalText      string   // the last assistant text (or the result text)
	Messages       []string // assistant texts in order
	// MCPServers is the MCP status the harness reported (Claude only); nil
	// when it reports none.
	MCPServers []ServerStatus
	// LocalTools are the harness-local tools the stream reported (tools not
	// served by the sharedos MCP server), sorted; nil when not reported.
	LocalTools []string
	ToolCalls  []ToolCall
	Usage      *Usage // nil when the harness reports no token counts
	Errors     []string
	Warnings   []string
}

// ServerStatus is one MCP server's state as the harness reported it.
type ServerStatus struct {
	Name   string
	Status string // as reported, e.g. "connected", "failed", "pending"
}

// Tool call states (ToolCall.Status).
const (
	CallStarted   = "started"
	CallCompleted = "completed"
	CallFailed    = "failed"
)

// ToolCall is one tool call the stream reported.
type ToolCall struct {
	ID     string
	Name   string // as the harness named it (e.g. mcp__sharedos__echo, sharedos_echo, echo)
	Server string // MCP server, when known ("" for a harness-local tool)
	Tool   string // the server's tool name, when known
	Status string // CallStarted, CallCompleted or CallFailed
}

// Usage is the token count a harness reported for the turn.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// All returns the four specs in a stable order.
func All() []Spec {
	return []Spec{claudeCode(), codex(), pi(), deepseek()}
}

// ByID returns the spec with the given id.
func ByID(id string) (Spec, bool) {
	for _, s := range All() {
		if s.ID == id {
			return s, true
		}
	}
	return Spec{}, false
}

// IDs returns the spec ids in All's order.
func IDs() []string {
	all := All()
	ids := make([]string, len(all))
	for i, s := range all {
		ids[i] = s.ID
	}
	return ids
}

// ResolveOptions checks given against the spec's options and fills in
// defaults. An unknown option name or value is an error that lists the choices,
// so a launcher can reject a bad flag before anything starts.
func (s Spec) ResolveOptions(given map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(s.Options))
	for _, o := range s.Options {
		out[o.Name] = o.Default
	}
	names := make([]string, 0, len(given))
	for name := range given {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic error for several bad options
	for _, name := range names {
		val := given[name]
		var opt *OptionSpec
		for i := range s.Options {
			if s.Options[i].Name == name {
				opt = &s.Options[i]
			}
		}
		if opt == nil {
			known := make([]string, len(s.Options))
			for i, o := range s.Options {
				known[i] = o.Name
			}
			if len(known) == 0 {
				return nil, fmt.Errorf("%s: unknown option %q (it takes none)", s.ID, name)
			}
			return nil, fmt.Errorf("%s: unknown option %q (known: %s)", s.ID, name, strings.Join(known, ", "))
		}
		ok := false
		for _, v := range opt.Values {
			ok = ok || v == val
		}
		if !ok {
			return nil, fmt.Errorf("%s: option %s: unknown value %q (one of: %s)", s.ID, name, val, strings.Join(opt.Values, ", "))
		}
		out[name] = val
	}
	return out, nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validate checks what every spec needs from its input. Specs add their own
// checks after it.
func validate(id string, in LaunchInput) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(in.Prompt) == "" {
		bad("empty prompt")
	}
	if in.BridgeURL == "" {
		bad("missing BridgeURL")
	} else if u, err := url.Parse(in.BridgeURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("BridgeURL %q is not an http(s) URL", in.BridgeURL)
	}
	if in.TokenEnv == "" {
		bad("missing TokenEnv (the bridge token reaches the harness only through a variable)")
	} else if !envNameRE.MatchString(in.TokenEnv) {
		bad("TokenEnv %q is not a variable name", in.TokenEnv)
	}
	if in.Model.APIKeyEnv != "" && !envNameRE.MatchString(in.Model.APIKeyEnv) {
		bad("Model.APIKeyEnv %q is not a variable name", in.Model.APIKeyEnv)
	}
	if in.Model.BaseURL != "" {
		if u, err := url.Parse(in.Model.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("Model.BaseURL %q is not an http(s) URL", in.Model.BaseURL)
		}
	}
	if in.Executable == "" {
		bad("missing Executable")
	}
	for _, p := range []struct{ name, path string }{{"Home", in.Home}, {"WorkDir", in.WorkDir}} {
		if !filepath.IsAbs(p.path) {
			bad("%s %q is not an absolute path", p.name, p.path)
		}
	}
	if in.Prefix != "" && !filepath.IsAbs(in.Prefix) {
		bad("Prefix %q is not an absolute path", in.Prefix)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s launch: %w", id, err)
	}
	return nil
}

// promptArgs places the prompt as the last positional argument. A prompt that
// starts with "-" would be read as a flag, so it goes after "--" (every CLI here
// parses "--" as the end of options); otherwise the argv keeps the exact shape
// harnesses.md shows.
func promptArgs(prompt string) []string {
	if strings.HasPrefix(prompt, "-") {
		return []string{"--", prompt}
	}
	return []string{prompt}
}

// modelRoot is a model base URL without a trailing "/" or "/v1": the specs add
// the path their CLI expects.
func modelRoot(base string) string {
	base = strings.TrimRight(base, "/")
	return strings.TrimSuffix(base, "/v1")
}

// bearerRef is the Authorization header value that makes the CLI expand the
// token from the environment.
func bearerRef(tokenEnv string) string { return "Bearer ${" + tokenEnv + "}" }

var versionRE = regexp.MustCompile(`\b\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?\b`)

// parseSemver returns the first x.y.z[-pre] in stdout (else stderr): every CLI
// here prints its version with some decoration ("2.1.332 (Claude Code)",
// "codex-cli 0.171.0").
func parseSemver(stdout, stderr string) (string, error) {
	for _, s := range []string{stdout, stderr} {
		if v := versionRE.FindString(s); v != "" {
			return v, nil
		}
	}
	out := strings.TrimSpace(stdout + " " + stderr)
	if len(out) > 120 {
		out = out[:120] + "…"
	}
	return "", fmt.Errorf("no version in --version output %q", out)
}

func defaultProbe(exe string) ProbeSpec {
	return ProbeSpec{
		Executables:  []string{exe},
		VersionArgs:  []string{"--version"},
		ParseVersion: parseSemver,
		Timeout:      defaultProbeTimeout,
		InstallHint:  "scripts/install-harnesses.sh installs the pinned CLI into .harnesses/",
	}
}
