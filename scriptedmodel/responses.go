package scriptedmodel

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"time"
)

// The OpenAI Responses API, as Codex speaks it (wire_api = "responses").

type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  json.RawMessage   `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
}

// responsesTool is a tool definition; a namespace nests tools.
type responsesTool struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Tools      []json.RawMessage `json:"tools"`
	Parameters json.RawMessage   `json:"parameters"`
}

// responsesItem is an input item, decoded only as far as the server needs.
type responsesItem struct {
	Type   string            `json:"type"`
	Output json.RawMessage   `json:"output"`
	Tools  []json.RawMessage `json:"tools"`
}

func (s *Server) responses(body []byte, e *RequestLog) (reply, error) {
	var req responsesRequest
	if err := decodeObject(body, &req); err != nil {
		return reply{}, err
	}
	t := turn{model: req.Model, stream: req.Stream}
	var items []json.RawMessage
	switch {
	case len(req.Input) == 0 || isNull(req.Input):
		return reply{}, errors.New("input is required")
	case req.Input[0] == '"': // a plain prompt: no history, no tool results
	case json.Unmarshal(req.Input, &items) != nil:
		return reply{}, errors.New("input must be a string or an array of items")
	}
	tools := req.Tools
	for _, raw := range items {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch {
		// Codex code mode puts its tools (the freeform exec among them) in an input
		// item rather than in "tools".
		case it.Type == "additional_tools":
			tools = append(tools, it.Tools...)
		// function_call_output, custom_tool_call_output, and any other *_call_output.
		case strings.HasSuffix(it.Type, "_call_output"):
			t.results = append(t.results, textOf(it.Output))
		}
	}
	t.offered = responsesOffered(tools, "")
	d := s.decide(t, e)
	model := req.Model
	if model == "" {
		model = s.modelID
	}

	var item map[string]any
	switch {
	case d.kind != ReplyToolCall:
		item = map[string]any{"type": "message", "role": "assistant", "id": "msg_" + newID(), "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": d.text, "annotations": []any{}}}}
	case d.call.Custom:
		item = map[string]any{"type": "custom_tool_call", "id": "ctc_" + newID(), "status": "completed",
			"call_id": "call_" + newID(), "name": d.call.Name, "input": d.call.Input}
	default:
		item = map[string]any{"type": "function_call", "id": "fc_" + newID(), "status": "completed",
			"call_id": "call_" + newID(), "name": d.call.Name, "arguments": string(d.call.Args)}
	}
	// Codex routes a namespaced call by its namespace; the flat mcp__<server>__<tool>
	// name is refused there.
	if d.kind == ReplyToolCall && d.call.Namespace != "" {
		item["namespace"] = d.call.Namespace
	}
	inTok, outTok := estimateTokens(len(body)), estimateTokens(len(d.text)+len(d.call.Args)+len(d.call.Input))
	usage := map[string]any{"input_tokens": inTok, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outTok, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": inTok + outTok}
	base := map[string]any{"id": "resp_" + newID(), "object": "response", "created_at": time.Now().Unix(),
		"model": model, "status": "in_progress", "output": []any{}}
	done := maps.Clone(base)
	done["status"], done["output"], done["usage"] = "completed", []any{item}, usage

	if !req.Stream {
		out, _ := json.Marshal(done)
		return reply{kind: d.kind, contentType: contentJSON, body: out}, nil
	}
	// created → in_progress → output_item.added → [output_text.delta] →
	// output_item.done → completed: the sequence Codex accepted from the reference fake.
	added := maps.Clone(item)
	added["status"] = "in_progress"
	events := []sseEvent{
		{"response.created", map[string]any{"type": "response.created", "sequence_number": 0, "response": base}},
		{"response.in_progress", map[string]any{"type": "response.in_progress", "sequence_number": 1, "response": base}},
		{"response.output_item.added", map[string]any{"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": added}},
	}
	if item["type"] == "message" {
		events = append(events, sseEvent{"response.output_text.delta", map[string]any{"type": "response.output_text.delta",
			"sequence_number": len(events), "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": d.text}})
	}
	events = append(events,
		sseEvent{"response.output_item.done", map[string]any{"type": "response.output_item.done", "sequence_number": len(events), "output_index": 0, "item": item}},
		sseEvent{"response.completed", map[string]any{"type": "response.completed", "sequence_number": len(events) + 1, "response": done}})
	return reply{kind: d.kind, contentType: contentSSE, body: encodeSSE(events)}, nil
}

// responsesOffered lists the tools in Responses tool definitions, descending into
// namespaces. A built-in tool without a name (web_search, local_shell) is listed by
// its type, so the log shows everything the model was offered.
func responsesOffered(tools []json.RawMessage, namespace string) []offeredTool {
	var out []offeredTool
	for _, raw := range tools {
		var t responsesTool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		switch {
		case t.Type == "namespace":
			if namespace == "" && t.Name != "" {
				out = append(out, responsesOffered(t.Tools, t.Name)...)
			}
		case t.Name != "":
			out = append(out, offeredTool{Name: t.Name, Namespace: namespace, Custom: t.Type == "custom",
				ArgsString: argsIsString(t.Parameters)})
		case t.Type != "":
			out = append(out, offeredTool{Name: t.Type, Namespace: namespace})
		}
	}
	return out
}
