package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos-run/kernel"
)

// Result _meta keys, as SharedOS names them.
const (
	MetaCatalogHash = "sharedos/catalogHash"
	MetaExecutionID = "sharedos/executionId"
	MetaNamespace   = "sharedos/namespace"
	MetaSource      = "sharedos/source"
	MetaStatus      = "sharedos/status"
	MetaCode        = "sharedos/code"
)

// rawResult is an MCP result whose JSON we write ourselves, so that the wire matches
// SharedOS exactly (the SDK's own types drop isError:false and add hints the
// published catalogue does not have).
type rawResult struct {
	mcp.ResultBase
	body json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.body, nil }

// marshalJS encodes like JSON.stringify: no HTML escaping, no trailing newline.
func marshalJS(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type successBody struct {
	Content           []textContent `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError"`
}

// refusal is the text body of a denied or failed call, in SharedOS's key order.
type refusal struct {
	Status    kernel.Status `json:"status"`
	Code      string        `json:"code"`
	Message   string        `json:"message"`
	Retryable bool          `json:"retryable,omitempty"`
}

type refusalMeta struct {
	Status kernel.Status `json:"sharedos/status"`
	Code   string        `json:"sharedos/code"`
}

type refusalBody struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
	Meta    refusalMeta   `json:"_meta"`
}

// renderCall turns a kernel result into the tools/call result: the output as text
// (itself when a string, else its JSON) and structuredContent when the tool declares
// an output schema and the output is an object; a refusal as an isError result whose
// text is {"status","code","message"[,"retryable"]} and whose _meta carries status
// and code. maxBytes caps a successful result; past it the call fails in band.
func renderCall(res kernel.Result, tool *PublishedTool, maxBytes int) ([]byte, kernel.Result, error) {
	if res.Status == kernel.Succeeded {
		encoded := res.OutputJSON
		if encoded == nil {
			b, err := marshalJS(res.Output)
			if err != nil {
				res.Status, res.Code, res.Message = kernel.Failed, kernel.CodeInvalidToolResult, "the tool's output cannot be encoded: "+err.Error()
				return renderCall(res, tool, maxBytes)
			}
			encoded = b
		}
		text, ok := res.Output.(string)
		if !ok {
			text = string(encoded)
		}
		body := successBody{Content: []textContent{{Type: "text", Text: text}}}
		if tool != nil && tool.OutputSchema != nil && bytes.HasPrefix(encoded, []byte("{")) {
			body.StructuredContent = encoded
		}
		out, err := marshalJS(body)
		if err != nil {
			return nil, res, err
		}
		if len(out) > maxBytes {
			res.Status, res.Code = kernel.Failed, kernel.CodeInvalidToolResult
			res.Message = fmt.Sprintf("the tool's result is %d bytes; the bridge passes at most %d (narrow the request)", len(out), maxBytes)
			res.Output, res.OutputJSON = nil, nil
			return renderCall(res, tool, maxBytes)
		}
		return out, res, nil
	}
	text, err := marshalJS(refusal{Status: res.Status, Code: res.Code, Message: res.Message, Retryable: res.Retryable})
	if err != nil {
		return nil, res, err
	}
	out, err := marshalJS(refusalBody{
		Content: []textContent{{Type: "text", Text: string(text)}},
		IsError: true,
		Meta:    refusalMeta{Status: res.Status, Code: res.Code},
	})
	return out, res, err
}

// listedTool is a published tool with the per-tool _meta of tools/list.
type listedTool struct {
	PublishedTool
	Meta map[string]string `json:"_meta"`
}

type listBody struct {
	Tools []listedTool      `json:"tools"`
	Meta  map[string]string `json:"_meta"`
}

// renderList is the tools/list result: the whole catalogue (no pagination), each tool
// exactly as published plus its _meta, and the catalogue's hash and execution id in
// the result _meta.
func renderList(c Catalog) ([]byte, error) {
	body := listBody{
		Tools: make([]listedTool, 0, len(c.Tools)),
		Meta:  map[string]string{MetaCatalogHash: c.CatalogHash, MetaExecutionID: c.ExecutionID},
	}
	for _, t := range c.Tools {
		body.Tools = append(body.Tools, listedTool{
			PublishedTool: t,
			Meta:          map[string]string{MetaNamespace: t.Metadata.Namespace, MetaSource: t.Metadata.Source},
		})
	}
	return marshalJS(body)
}

type initializeBody struct {
	ProtocolVersion string              `json:"protocolVersion"`
	Capabilities    initializeCaps      `json:"capabilities"`
	ServerInfo      *mcp.Implementation `json:"serverInfo"`
	Instructions    string              `json:"instructions,omitempty"`
}

type initializeCaps struct {
	Tools struct {
		ListChanged bool `json:"listChanged"`
	} `json:"tools"`
}

// renderInitialize writes the initialize result with capabilities exactly
// {"tools":{"listChanged":false}} (the SDK's types omit the false).
func renderInitialize(r *mcp.InitializeResult) (mcp.Result, error) {
	body, err := marshalJS(initializeBody{ProtocolVersion: r.ProtocolVersion, ServerInfo: r.ServerInfo, Instructions: r.Instructions})
	if err != nil {
		return nil, err
	}
	return &rawResult{body: body}, nil
}
