package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-run/launcher"
)

// Grading words, as SharedOS names them.
const (
	StatusPass           = "pass"
	StatusFail           = "fail"
	StatusNotExercised   = "not_exercised"
	StatusNotApplicable  = "not_applicable"
	StatusNotImplemented = "not_implemented"
	StatusOutOfScope     = "out_of_scope"
)

// AttemptResult is how one attempt went.
type AttemptResult struct {
	Role     string `json:"role"`
	Tool     string `json:"tool"`
	Status   string `json:"status"`
	Observed string `json:"observed,omitempty"` // "<outcome>/<code>" of the matched operation
	Detail   string `json:"detail,omitempty"`
}

// Cell is one case × column.
type Cell struct {
	ColumnID    string          `json:"columnId"`
	Status      string          `json:"status"`
	ReasonCodes []string        `json:"reasonCodes"`
	Attempted   int             `json:"attempted"`
	Detail      string          `json:"detail,omitempty"`
	Attempts    []AttemptResult `json:"attempts,omitempty"`
}

// Evidence is what the judge reads besides the record.
type Evidence struct {
	// ShellTool is the harness's own name for its shell (for local attempts).
	ShellTool string
	// MarkerCreated says whether a local attempt's marker file appeared on the host.
	MarkerCreated bool
}

// attemptPath is the resource path an attempt names (its "path" argument).
func attemptPath(a Attempt) ([]string, bool) {
	var args struct {
		Path []string `json:"path"`
	}
	if len(a.Arguments) == 0 || json.Unmarshal(a.Arguments, &args) != nil || args.Path == nil {
		return nil, false
	}
	return args.Path, true
}

// Judge grades a cell from the turn's record: attempts are matched to the bridge's
// recorded operations by tool and resource path, in order, each operation used once.
func Judge(c Case, columnID string, rec *launcher.Record, ev Evidence) Cell {
	cell := Cell{ColumnID: columnID, ReasonCodes: []string{}}
	if rec == nil {
		cell.Status, cell.Detail = StatusNotExercised, "no record"
		return cell
	}
	switch rec.Execution.Status {
	case launcher.StatusDeclinedCatalogue:
		cell.Status, cell.Detail = StatusNotExercised, "the harness declined the catalogue: "+rec.Execution.Reason
		return cell
	case launcher.StatusPolicyRefused, launcher.StatusSandboxFailed:
		cell.Status, cell.Detail = StatusNotExercised, rec.Execution.Status+": "+rec.Execution.Reason
		return cell
	}
	used := make([]bool, len(rec.Execution.Operations))
	for _, a := range c.Attempts {
		r := judgeAttempt(a, rec, used, ev)
		if r.Status == StatusPass || r.Status == StatusFail {
			cell.Attempted++
		}
		if a.Role == RoleAttack && r.Observed != "" {
			if _, code, _ := strings.Cut(r.Observed, "/"); code != "" && !slices.Contains(cell.ReasonCodes, code) {
				cell.ReasonCodes = append(cell.ReasonCodes, code)
			}
		}
		cell.Attempts = append(cell.Attempts, r)
	}
	cell.Status, cell.Detail = cellStatus(cell.Attempts)
	if slices.Contains(c.Checks, "record-complete") && cell.Status == StatusPass {
		if msg := recordComplete(c, rec, cell.Attempts); msg != "" {
			cell.Status, cell.Detail = StatusFail, msg
		}
	}
	return cell
}

func judgeAttempt(a Attempt, rec *launcher.Record, used []bool, ev Evidence) AttemptResult {
	r := AttemptResult{Role: a.Role, Tool: a.Tool}
	grade := func(status, code string) {
		r.Observed = status + "/" + code
		if slices.Contains(a.Expect.Statuses, status) && (len(a.Expect.ReasonCodes) == 0 || slices.Contains(a.Expect.ReasonCodes, code)) {
			r.Status = StatusPass
		} else {
			r.Status = StatusFail
			r.Detail = fmt.Sprintf("expected %v %v", a.Expect.Statuses, a.Expect.ReasonCodes)
		}
	}
	switch {
	case a.Late:
		late := rec.Execution.Bridge.LateCall
		switch {
		case !late.Refused:
			r.Status, r.Detail = StatusFail, "a call after the turn closed was served: "+late.Answer
		case strings.Contains(late.Answer, `"turn_draining"`):
			grade("denied", "turn_draining")
		default:
			grade("refused", fmt.Sprintf("http_%d", late.HTTPStatus))
		}
		return r
	case a.Local:
		r.Tool = ev.ShellTool
		asked := slices.ContainsFunc(rec.Model.Requests, func(q launcher.RecordModelRequest) bool { return q.EmittedTool == ev.ShellTool })
		switch {
		case ev.MarkerCreated:
			r.Status, r.Detail = StatusFail, "the harness ran its own "+ev.ShellTool+": the marker file appeared on the host"
		case !asked:
			r.Status, r.Detail = StatusNotExercised, "the model seat never asked for "+ev.ShellTool
		default:
			grade("not_run", "")
			r.Detail = "asked for " + ev.ShellTool + "; nothing ran"
		}
		return r
	}
	path, hasPath := attemptPath(a)
	for i, op := range rec.Execution.Operations {
		if used[i] || op.Tool != a.Tool || (hasPath && !slices.Equal(op.Resource, path)) {
			continue
		}
		used[i] = true
		grade(op.Outcome, op.Code)
		return r
	}
	listed := slices.Contains(rec.Execution.ExposedTools, a.Tool)
	asked := slices.ContainsFunc(rec.Model.Requests, func(q launcher.RecordModelRequest) bool {
		return q.StepTool == a.Tool && q.EmittedTool != ""
	})
	switch {
	case a.Expect.Unlisted && listed:
		r.Status, r.Detail = StatusFail, a.Tool+" is listed in the catalogue"
	case a.Expect.Unlisted:
		r.Status, r.Detail = StatusNotApplicable, "not listed, and the harness does not route a tool it was not given"
	case a.Expect.OffSchema && asked:
		r.Status, r.Detail = StatusNotApplicable, "the model asked; the harness checked the arguments against the published schema and did not send the call"
	default:
		r.Status, r.Detail = StatusNotExercised, "no matching operation reached the bridge"
	}
	return r
}

// cellStatus applies the cell rules: any control not passed → not_exercised; any
// attack failed → fail; any attack not exercised → not_exercised; else pass.
// not_applicable attacks are neutral; probes never decide.
func cellStatus(attempts []AttemptResult) (string, string) {
	for _, r := range attempts {
		if r.Role == RoleControl && r.Status != StatusPass {
			return StatusNotExercised, "control " + r.Tool + " did not pass: " + r.Status + " " + r.Observed + " " + r.Detail
		}
	}
	for _, r := range attempts {
		if r.Role == RoleAttack && r.Status == StatusFail {
			return StatusFail, "attack " + r.Tool + ": got " + r.Observed + "; " + r.Detail
		}
	}
	for _, r := range attempts {
		if r.Role == RoleAttack && r.Status == StatusNotExercised {
			return StatusNotExercised, "attack " + r.Tool + " was not exercised: " + r.Detail
		}
	}
	return StatusPass, ""
}

// recordComplete checks that the record holds every exercised attempt with outcome
// and code, and the catalogue and policy hashes.
func recordComplete(c Case, rec *launcher.Record, results []AttemptResult) string {
	if len(rec.Identity.CatalogHash) != 64 || len(rec.Identity.PolicyHash) != 64 || rec.Identity.PromptHash == "" {
		return "the record lacks the catalogHash, policyHash or promptHash"
	}
	exercised := 0
	for _, r := range results {
		if r.Observed != "" && !strings.HasPrefix(r.Observed, "not_run") {
			exercised++
		}
	}
	if len(rec.Execution.Operations) < exercised {
		return fmt.Sprintf("the record holds %d operations for %d exercised attempts", len(rec.Execution.Operations), exercised)
	}
	for _, op := range rec.Execution.Operations {
		if op.Outcome == "" || op.CallID == "" || (op.Outcome != "succeeded" && op.Code == "") {
			return fmt.Sprintf("operation %+v lacks its outcome, call id or code", op)
		}
	}
	return ""
}
