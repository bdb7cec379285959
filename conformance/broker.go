package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// TicketsNamespace is the brokered namespace the broker cases use: a dynamic tool
// provider standing in for a brokered MCP server, so that the kernel's rules are seen
// to hold for tools that are not the built-in files namespace.
const TicketsNamespace = "tickets"

// ticketsProvider serves tickets.list and tickets.get over a fixed, in-memory tree.
type ticketsProvider struct{}

func (ticketsProvider) Name() string { return "tickets-broker" }

// ticketBodies is the broker's fixed content.
func ticketBodies() map[string]string {
	return map[string]string{
		"project-a/T-1": "Login button does nothing on Safari.",
		"project-a/T-3": "Export to CSV drops the last row.",
		"project-b/T-2": "Payroll figures for Q3 (confidential).",
	}
}

const ticketSchema = `{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"array","items":{"type":"string"},"minItems":0,"maxItems":64}}}`

func (ticketsProvider) Tools(context.Context, policy.AccessContext) ([]kernel.Tool, error) {
	tool := func(name, action, desc string, handler func(path []string) (any, error)) kernel.Tool {
		return kernel.Tool{
			Name: name, Description: desc, InputSchema: json.RawMessage(ticketSchema),
			Namespace: TicketsNamespace, Source: "tickets-broker", ReadWrite: kernel.Read,
			Ceiling: policy.Capability{Resource: policy.Resource{Namespace: TicketsNamespace, Path: []string{}}, Actions: []string{action}, Scope: policy.ScopeDescendants},
			Requirement: func(args map[string]any, _ policy.AccessContext) (policy.Requirement, error) {
				path, err := stringPath(args["path"])
				if err != nil {
					return policy.Requirement{}, err
				}
				return policy.Requirement{Resource: policy.Resource{Namespace: TicketsNamespace, Path: path}, Action: action}, nil
			},
			Handler: func(_ context.Context, inv kernel.Invocation) (any, error) {
				return handler(inv.Requirement.Resource.Path)
			},
		}
	}
	return []kernel.Tool{
		tool("tickets.list", "list", "List tickets under a granted project path.", func(path []string) (any, error) {
			prefix := strings.Join(path, "/")
			var ids []string
			for id := range ticketBodies() {
				if prefix == "" || strings.HasPrefix(id, prefix+"/") {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			return map[string]any{"tickets": ids}, nil
		}),
		tool("tickets.get", "get", "Read one ticket at a granted path.", func(path []string) (any, error) {
			body, ok := ticketBodies()[strings.Join(path, "/")]
			if !ok {
				return nil, &kernel.ToolError{Message: fmt.Sprintf("no ticket at %s", strings.Join(path, "/"))}
			}
			return map[string]any{"path": path, "body": body}, nil
		}),
	}, nil
}

func stringPath(v any) ([]string, error) {
	raw, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("path must be an array of segments")
	}
	path := make([]string, 0, len(raw))
	for _, s := range raw {
		str, ok := s.(string)
		if !ok {
			return nil, fmt.Errorf("path segments must be strings")
		}
		path = append(path, str)
	}
	return path, policy.ValidatePath(path)
}
