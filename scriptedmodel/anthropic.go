package scriptedmodel

import (
	"encoding/json"
	"errors"
	"strings"
)

// The Anthropic Messages API, as Claude Code (and Pi's anthropic-messages provider)
// speak it.

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	// Tools are decoded one by one, leniently: server tools and future tool kinds
	// have other shapes, and a model does not refuse a request over them.
	Tools []json.RawMessage `json:"tools"`
}

func (s *Server) anthropic(body []byte, e *RequestLog) (reply, error) {
	var req anthropicRequest
	if err := decodeObject(body, &req); err != nil {
		return reply{}, err
	}
	if req.Messages == nil {
		return reply{}, errors.New("messages is required")
	}
	t := turn{model: req.Model, stream: req.Stream}
	for _, raw := range req.Tools {
		var tool struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if json.Unmarshal(raw, &tool) == nil && tool.Name != "" {
			t.offered = append(t.offered, offeredTool{Name: tool.Name, ArgsString: argsIsString(tool.InputSchema)})
		}
	}
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string content holds no tool result
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				t.results = append(t.results, textOf(b.Content))
			}
		}
	}
	d := s.decide(t, e)
	model := req.Model
	if model == "" {
		model = s.modelID
	}

	var block map[string]any
	stop := "end_turn"
	if d.kind == ReplyToolCall {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": "toolu_" + newID(), "name": d.call.Name, "input": d.call.Args}
	} else {
		block = map[string]any{"type": "text", "text": d.text}
	}
	outTokens := estimateTokens(len(d.text) + len(d.call.Args))
	usage := map[string]any{"input_tokens": estimateTokens(len(body)), "output_tokens": outTokens,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	id := "msg_" + newID()

	if !req.Stream {
		out, _ := json.Marshal(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return reply{kind: d.kind, contentType: contentJSON, body: out}, nil
	}

	// message_start → content_block_start → content_block_delta → content_block_stop
	// → message_delta(stop_reason) → message_stop: the sequence Claude Code accepted.
	startUsage := map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	events := []sseEvent{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": startUsage,
	}}}}
	if d.kind == ReplyToolCall {
		// The input arrives as JSON text in the delta; the start block's input is empty.
		events = append(events,
			sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": d.call.Name, "input": map[string]any{}}}},
			sseEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(d.call.Args)}}})
	} else {
		events = append(events,
			sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "text", "text": ""}}},
			sseEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": d.text}}})
	}
	events = append(events,
		sseEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		sseEvent{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": outTokens}}},
		sseEvent{"message_stop", map[string]any{"type": "message_stop"}})
	return reply{kind: d.kind, contentType: contentSSE, body: encodeSSE(events)}, nil
}

// textOf flattens a tool result's content: a string, or a list of blocks whose
// texts are joined by newlines, or (any other JSON) the JSON itself.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 || isNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var texts []string
		for _, p := range parts {
			if p.Text != nil {
				texts = append(texts, *p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return string(raw)
}

// argsIsString reports whether a tool's JSON schema types its "args" property as a
// string: how a pi-mcp-adapter proxy that wants JSON text says so.
func argsIsString(schema json.RawMessage) bool {
	var sc struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &sc) != nil {
		return false
	}
	return sc.Properties["args"].Type == "string"
}
