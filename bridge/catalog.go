// Package bridge is sharedos-run's MCP face: the published projection of the turn's
// tools and its catalogHash, execution tokens, the portable-name aliases, and (with
// the server) the refusal rendering and call log. It never decides allow or deny: the
// kernel does, on every call.
package bridge

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// CatalogVersion is the catalogue format version.
const CatalogVersion = "1"

// PublishedTool is all a harness may see of a tool. The projection cannot emit any
// other key: requirement, class, grants, handlers and other metadata stay behind.
type PublishedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  Annotations     `json:"annotations"`
	Metadata     ToolMetadata    `json:"metadata"`
}

// Annotations are the published hints. readOnlyHint is always present; the others
// only when the tool declares them; openWorldHint never.
type Annotations struct {
	ReadOnlyHint    bool  `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
}

// ToolMetadata says where a tool comes from.
type ToolMetadata struct {
	Namespace string `json:"namespace"`
	Source    string `json:"source"`
}

// Catalog is the turn's published catalogue.
type Catalog struct {
	Version     string          `json:"version"`
	ExecutionID string          `json:"executionId"`
	CatalogHash string          `json:"catalogHash"`
	Tools       []PublishedTool `json:"tools"`
}

// Project is the published definition of a registered tool.
func Project(t *kernel.Tool) PublishedTool {
	return PublishedTool{
		Name:         t.Name,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		OutputSchema: t.OutputSchema,
		Annotations: Annotations{
			ReadOnlyHint:    t.ReadOnlyHint(),
			DestructiveHint: t.Destructive,
			IdempotentHint:  t.Idempotent,
		},
		Metadata: ToolMetadata{Namespace: t.Namespace, Source: t.Source},
	}
}

// NewCatalog projects the tools, sorts them by name and computes the hash.
func NewCatalog(executionID string, tools []*kernel.Tool) (Catalog, error) {
	published := make([]PublishedTool, 0, len(tools))
	for _, t := range tools {
		published = append(published, Project(t))
	}
	slices.SortFunc(published, func(a, b PublishedTool) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(published); i++ {
		if published[i].Name == published[i-1].Name {
			return Catalog{}, fmt.Errorf("catalogue: tool %s appears twice", published[i].Name)
		}
	}
	if len(published) > kernel.MaxCatalogTools {
		return Catalog{}, fmt.Errorf("catalogue: %d tools; at most %d", len(published), kernel.MaxCatalogTools)
	}
	hash, err := CatalogHash(published)
	if err != nil {
		return Catalog{}, err
	}
	return Catalog{Version: CatalogVersion, ExecutionID: executionID, CatalogHash: hash, Tools: published}, nil
}

// CatalogHash is the lowercase hex SHA-256 of the canonical JSON of the tools, which
// must already be sorted by name. The empty catalogue hashes "[]".
func CatalogHash(sorted []PublishedTool) (string, error) {
	if sorted == nil {
		sorted = []PublishedTool{}
	}
	h, err := canonjson.HashValue(sorted)
	if err != nil {
		return "", fmt.Errorf("hashing catalogue: %w", err)
	}
	return h, nil
}

// Lookup finds a tool by name, or by its portable name when exactly one tool has it.
// alias is the name as sent when it was mapped, "" when the name was exact.
func (c Catalog) Lookup(sent string) (tool PublishedTool, alias string, ok bool) {
	for _, t := range c.Tools {
		if t.Name == sent {
			return t, "", true
		}
	}
	var match *PublishedTool
	for i := range c.Tools {
		if policy.PortableName(c.Tools[i].Name) == sent {
			if match != nil {
				return PublishedTool{}, "", false
			}
			match = &c.Tools[i]
		}
	}
	if match == nil {
		return PublishedTool{}, "", false
	}
	return *match, sent, true
}

// ResolveName maps a name a harness sent to the catalogue's name: the exact name, or
// the unique tool whose portable name equals it. Otherwise the raw name goes through
// unchanged (and the kernel refuses it). mcp__<server>__ prefixes are the client's
// display and are never stripped here.
func (c Catalog) ResolveName(sent string) (name, alias string) {
	if t, alias, ok := c.Lookup(sent); ok {
		return t.Name, alias
	}
	return sent, ""
}
