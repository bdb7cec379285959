package launcher

import (
	"time"

	"github.com/sharedos/sharedos-run/bridge"
	"github.com/sharedos/sharedos-run/policy"
	"github.com/sharedos/sharedos-run/sandbox"
)

// RecordVersion is the execution record's format version.
const RecordVersion = "1"

// Turn statuses, as the record names them.
const (
	StatusSucceeded         = "succeeded"
	StatusFailed            = "failed"
	StatusDeclinedCatalogue = "declined_catalogue"
	StatusPolicyRefused     = "policy_refused"
	StatusTimeout           = "timeout"
	StatusSandboxFailed     = "sandbox_failed"
)

// Record is the execution record of one turn: what the harness was given, what it
// tried, what was allowed and refused, and what the sandbox saw.
type Record struct {
	RecordVersion string          `json:"recordVersion"`
	Identity      RecordIdentity  `json:"identity"`
	Execution     RecordExecution `json:"execution"`
	Sandbox       RecordSandbox   `json:"sandbox"`
	Cost          RecordCost      `json:"cost"`
	Model         RecordModel     `json:"model"`
}

// RecordIdentity says what ran: comparable columns have equal catalogue hashes and
// models.
type RecordIdentity struct {
	SharedosRun         string            `json:"sharedosRun"`
	Harness             string            `json:"harness"`
	HarnessVersion      string            `json:"harnessVersion"`
	SpecID              string            `json:"specId"`
	Options             map[string]string `json:"options,omitempty"`
	MCPSupport          string            `json:"mcpSupport"`
	MCPExtension        string            `json:"mcpExtension,omitempty"`
	MCPExtensionVersion string            `json:"mcpExtensionVersion,omitempty"`
	ModelID             string            `json:"modelId"`
	Provider            string            `json:"provider"`
	ToolPolicy          policy.ToolPolicy `json:"toolPolicy"`
	PolicyHash          string            `json:"policyHash"`
	CatalogHash         string            `json:"catalogHash"`
	ToolCount           int               `json:"toolCount"`
	PromptHash          string            `json:"promptHash"`
}

// RecordExecution says what happened.
type RecordExecution struct {
	ExecutionID    string   `json:"executionId"`
	Status         string   `json:"status"`
	TerminalReason string   `json:"terminalReason"`
	Reason         string   `json:"reason,omitempty"`
	OutputText     string   `json:"outputText"`
	ExposedTools   []string `json:"exposedTools"`
	// LocalTools: what the launch declared, what the harness reported (when it does),
	// and what the strict policy check found beyond harnessLocal.
	LocalTools RecordLocalTools  `json:"localTools"`
	Bridge     RecordBridge      `json:"bridge"`
	Operations []RecordOperation `json:"operations"`
	// HarnessToolCalls are the tool calls the harness's own stream reported.
	HarnessToolCalls []RecordHarnessCall `json:"harnessToolCalls"`
	Errors           []string            `json:"errors,omitempty"`
	Warnings         []string            `json:"warnings,omitempty"`
}

// RecordLocalTools is the harness-local tool surface.
type RecordLocalTools struct {
	Declared []string `json:"declared"`
	Measured []string `json:"measured"` // null when the harness does not report them
	Extra    []string `json:"extra,omitempty"`
}

// RecordBridge says whether the harness reached the catalogue.
type RecordBridge struct {
	Initialized bool           `json:"initialized"`
	Listed      bool           `json:"listed"`
	Clients     []string       `json:"clients,omitempty"`
	Events      []bridge.Event `json:"events"`
	// LateCall is a tools/call made with the turn's token after the turn closed.
	LateCall RecordLateCall `json:"lateCall"`
}

// RecordLateCall is how the closed bridge answered a late call.
type RecordLateCall struct {
	Refused    bool   `json:"refused"`
	HTTPStatus int    `json:"httpStatus"`
	Answer     string `json:"answer"`
}

// RecordOperation is one tools/call the bridge handled.
type RecordOperation struct {
	CallID     string    `json:"callId"`
	Tool       string    `json:"tool"`
	Alias      string    `json:"alias,omitempty"`
	Resource   []string  `json:"resource"`
	Action     string    `json:"action,omitempty"`
	Outcome    string    `json:"outcome"`
	Code       string    `json:"code,omitempty"`
	Message    string    `json:"message,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"`
}

// RecordHarnessCall is a tool call as the harness reported it.
type RecordHarnessCall struct {
	Name   string `json:"name"`
	Server string `json:"server,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Status string `json:"status"`
}

// RecordSandbox says what the sandbox saw.
type RecordSandbox struct {
	CgroupMode    sandbox.CgroupMode  `json:"cgroupMode"`
	CgroupWarning string              `json:"cgroupWarning,omitempty"`
	Limits        sandbox.Limits      `json:"limits"`
	PeakMemory    int64               `json:"peakMemory"`
	PeakTasks     int64               `json:"peakTasks"`
	CPUTimeMs     float64             `json:"cpuTimeMs"`
	OOMKills      int64               `json:"oomKills"`
	Network       RecordNetwork       `json:"network"`
	Violations    []sandbox.Violation `json:"violations"`
	ExitCode      int                 `json:"exitCode"`
	Signal        int                 `json:"signal,omitempty"`
	TimedOut      bool                `json:"timedOut,omitempty"`
	Killed        bool                `json:"killed,omitempty"`
	Writable      []string            `json:"writable,omitempty"`
}

// RecordNetwork is what the sandbox's network allowed.
type RecordNetwork struct {
	Mode          string   `json:"mode"`
	AllowLoopback []int    `json:"allowLoopback,omitempty"`
	AllowEgress   []string `json:"allowEgress,omitempty"`
}

// RecordCost is time and volume.
type RecordCost struct {
	StartedAt    time.Time `json:"startedAt"`
	EndedAt      time.Time `json:"endedAt"`
	ElapsedMs    float64   `json:"elapsedMs"`
	ToolCalls    int       `json:"toolCalls"`
	InputTokens  *int64    `json:"inputTokens,omitempty"`
	OutputTokens *int64    `json:"outputTokens,omitempty"`
}

// RecordModel is the model seat: scripted or live, and what each request offered.
type RecordModel struct {
	Scripted bool                 `json:"scripted"`
	BaseURL  string               `json:"baseUrl,omitempty"`
	Requests []RecordModelRequest `json:"requests,omitempty"`
}

// RecordModelRequest is one request the scripted model answered.
type RecordModelRequest struct {
	API          string   `json:"api"`
	OfferedTools []string `json:"offeredTools"`
	Step         int      `json:"step"`
	StepTool     string   `json:"stepTool,omitempty"`
	EmittedTool  string   `json:"emittedTool,omitempty"`
	Offered      bool     `json:"offered"`
	Reply        string   `json:"reply"`
}
