package kernel

import (
	"encoding/json"
	"time"

	"github.com/sharedos/sharedos-run/policy"
)

// Status is a call's outcome.
type Status string

// Call outcomes.
const (
	Succeeded Status = "succeeded"
	Denied    Status = "denied"
	Failed    Status = "failed"
)

// Denial codes: the kernel refused the call before running anything.
const (
	CodeToolUnavailable       = "tool_unavailable"
	CodeNoMatchingGrant       = "no_matching_grant"
	CodeInvalidRequest        = "invalid_request"
	CodeGrantExhausted        = "grant_exhausted"
	CodeStepLimitExceeded     = "step_limit_exceeded"
	CodeToolCallLimitExceeded = "tool_call_limit_exceeded"
	CodeTurnDraining          = "turn_draining"
	CodeHostPolicyDenied      = "host_policy_denied"
	CodeAuthorityUnavailable  = "authority_unavailable"
)

// Failure codes: the call was authorized as far as it got, and then could not complete.
const (
	CodeInvalidToolArguments   = "invalid_tool_arguments"
	CodeInvalidToolRequirement = "invalid_tool_requirement"
	CodeToolExecutionFailed    = "tool_execution_failed"
	CodeInvalidToolResult      = "invalid_tool_result"
	CodeToolCatalogUnavailable = "tool_catalog_unavailable"
)

// Call is one request to run a tool. Tool is deliberately any string: a bad name
// reaches the kernel and is refused and recorded like any other.
type Call struct {
	ID          string
	Tool        string
	Arguments   json.RawMessage // nil or empty means {}
	TraceID     string
	RequestedAt time.Time
}

// Result is the kernel's answer to a call.
type Result struct {
	Status    Status
	Code      string // empty on success
	Message   string // empty on success
	Retryable bool
	Output    any // the handler's output on success
	// OutputJSON is Output encoded as JSON (no HTML escaping), made while checking it.
	OutputJSON json.RawMessage
	// Cancelled is set when the caller's context ended while the tool ran: the
	// bridge aborts the request instead of answering it.
	Cancelled bool

	// Requirement is set once it was derived from the arguments.
	Requirement *policy.Requirement
	// GrantID names the grant that allowed the call.
	GrantID string
	// Started and Finished bound the kernel's handling of the call.
	Started, Finished time.Time
}

func denied(code, msg string) Result { return Result{Status: Denied, Code: code, Message: msg} }
func failed(code, msg string) Result { return Result{Status: Failed, Code: code, Message: msg} }

// ToolError lets a handler say whether retrying could help (a version conflict can).
type ToolError struct {
	Message   string
	Retryable bool
}

func (e *ToolError) Error() string { return e.Message }
