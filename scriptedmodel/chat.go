package scriptedmodel

import (
	"encoding/json"
	"errors"
	"time"
)

// The OpenAI Chat Completions API, as Pi's openai-completions provider speaks it.

type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools         []json.RawMessage `json:"tools"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) chat(body []byte, e *RequestLog) (reply, error) {
	var req chatRequest
	if err := decodeObject(body, &req); err != nil {
		return reply{}, err
	}
	if req.Messages == nil {
		return reply{}, errors.New("messages is required")
	}
	t := turn{model: req.Model, stream: req.Stream}
	for _, raw := range req.Tools {
		var tool struct {
			Name     string `json:"name"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &tool) != nil {
			continue
		}
		name := tool.Function.Name
		if name == "" {
			name = tool.Name
		}
		if name != "" {
			t.offered = append(t.offered, offeredTool{Name: name, ArgsString: argsIsString(tool.Function.Parameters)})
		}
	}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			t.results = append(t.results, textOf(m.Content))
		}
	}
	d := s.decide(t, e)
	model := req.Model
	if model == "" {
		model = s.modelID
	}

	id, created := "chatcmpl-"+newID(), time.Now().Unix()
	var toolCall map[string]any
	var content any // null alongside tool calls, as the API sends it
	finish := "stop"
	if d.kind == ReplyToolCall {
		finish = "tool_calls"
		args := string(d.call.Args)
		if d.call.Custom {
			args = d.call.Input
		}
		toolCall = map[string]any{"id": "call_" + newID(), "type": "function",
			"function": map[string]any{"name": d.call.Name, "arguments": args}}
	} else {
		content = d.text
	}
	inTok, outTok := estimateTokens(len(body)), estimateTokens(len(d.text)+len(d.call.Args))
	usage := map[string]any{"prompt_tokens": inTok, "completion_tokens": outTok, "total_tokens": inTok + outTok}

	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": content}
		if toolCall != nil {
			msg["tool_calls"] = []any{toolCall}
		}
		out, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return reply{kind: d.kind, contentType: contentJSON, body: out}, nil
	}

	chunk := func(delta map[string]any, finish any) sseEvent {
		return sseEvent{data: map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}}
	}
	// role chunk → tool call head (id, name) → its arguments → finish → [usage] →
	// [DONE]: the sequence Pi accepted from the reference fake.
	events := []sseEvent{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if toolCall != nil {
		fn := toolCall["function"].(map[string]any)
		events = append(events,
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": toolCall["id"], "type": "function",
				"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil),
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
				"function": map[string]any{"arguments": fn["arguments"]}}}}, nil))
	} else {
		events = append(events, chunk(map[string]any{"content": d.text}, nil))
	}
	events = append(events, chunk(map[string]any{}, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		events = append(events, sseEvent{data: map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": model, "choices": []any{}, "usage": usage}})
	}
	events = append(events, sseEvent{data: "[DONE]"})
	return reply{kind: d.kind, contentType: contentSSE, body: encodeSSE(events)}, nil
}
