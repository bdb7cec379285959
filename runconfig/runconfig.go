// Package runconfig reads the run configuration (JSON or YAML): the workspace, the
// access context, the grants, the enabled tool namespaces, the budgets and the
// ToolPolicy of a run. With no file it builds the documented default.
package runconfig

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// FilesNamespace is the built-in managed namespace.
const FilesNamespace = "files"

// ReadActions are the files actions that change nothing.
func ReadActions() []string {
	return []string{"list", "stat", "read", "search", "grep", "snapshot:list"}
}

// WriteActions are the files actions that change the workspace.
func WriteActions() []string {
	return []string{"create", "replace", "append", "delete", "snapshot:create", "snapshot:restore"}
}

// Defaults of the context when neither a file nor a flag says otherwise.
const (
	DefaultNamespaceID = "workspace"
	DefaultActor       = "agent:harness"
	DefaultAuthority   = "sharedos-run"
	DefaultPurpose     = "coding-turn"
)

// File is the configuration file as written. Relative paths are relative to the
// file's directory.
type File struct {
	Workspace  string             `json:"workspace"`
	StateDir   string             `json:"stateDir,omitempty"`
	Context    FileContext        `json:"context"`
	Grants     []policy.Grant     `json:"grants,omitempty"`
	GrantsFile string             `json:"grantsFile,omitempty"`
	Namespaces FileNamespaces     `json:"namespaces"`
	Budgets    kernel.Budgets     `json:"budgets"`
	ToolPolicy *policy.ToolPolicy `json:"toolPolicy,omitempty"`
	HostDeny   []string           `json:"hostDeny,omitempty"`
}

// FileContext is the access context part of the file.
type FileContext struct {
	NamespaceID string `json:"namespaceId"`
	Actor       string `json:"actor"`
	Authority   string `json:"authority"`
	Owner       string `json:"owner,omitempty"`
	Purpose     string `json:"purpose"`
}

// FileNamespaces says which tool namespaces are on. With settingsFile, the set lives in
// that file (shared by processes, patched with `{enable, disable}`) and enabled seeds
// it only when the file does not exist yet.
type FileNamespaces struct {
	Enabled      []string `json:"enabled"`
	SettingsFile string   `json:"settingsFile,omitempty"`
}

// Config is a resolved, validated run configuration.
type Config struct {
	Source                string // the file it came from, or "default"
	Workspace             string // absolute
	StateDir              string // absolute, outside the workspace
	Context               policy.AccessContext
	Grants                []policy.Grant
	EnabledNamespaces     []string
	NamespaceSettingsFile string
	Budgets               kernel.Budgets
	ToolPolicy            policy.ToolPolicy
	// ToolPolicyDeclared is true when the configuration file gave a toolPolicy; a
	// harness turn otherwise declares the launch's own local tools (still strict).
	ToolPolicyDeclared bool
	HostDeny           []string
}

// Overrides are command-line flags that win over the file or the default.
type Overrides struct {
	Workspace string
	ReadOnly  bool
}

// Load reads the file at path, or builds the default when path is "".
func Load(path string, o Overrides) (*Config, error) {
	if path == "" {
		ws := o.Workspace
		if ws == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("finding the current directory: %w", err)
			}
			ws = wd
		}
		return Default(ws, o.ReadOnly, time.Now())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading run configuration: %w", err)
	}
	absPath, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("run configuration %s: %w", path, err)
	}
	cfg, err := Parse(data, filepath.Dir(absPath), o)
	if err != nil {
		return nil, fmt.Errorf("run configuration %s: %w", path, err)
	}
	cfg.Source = path
	return cfg, nil
}

// Default is the configuration without a file: the workspace directory, the files
// namespace enabled, read actions on the whole workspace and, unless readOnly, write
// actions on it too, under a strict ToolPolicy with no local tools.
func Default(workspace string, readOnly bool, now time.Time) (*Config, error) {
	actions := ReadActions()
	if !readOnly {
		actions = append(actions, WriteActions()...)
	}
	f := File{
		Workspace: workspace,
		Context: FileContext{
			NamespaceID: DefaultNamespaceID,
			Actor:       DefaultActor,
			Authority:   DefaultAuthority,
			Purpose:     DefaultPurpose,
		},
		Grants: []policy.Grant{{
			ID:          "default-workspace",
			NamespaceID: DefaultNamespaceID,
			Subject:     DefaultActor,
			Issuer:      DefaultAuthority,
			IssuedAt:    now.UTC().Truncate(time.Second),
			Capabilities: []policy.Capability{{
				Resource: policy.Resource{Namespace: FilesNamespace, Path: []string{}},
				Actions:  actions,
				Scope:    policy.ScopeDescendants,
			}},
		}},
		Namespaces: FileNamespaces{Enabled: []string{FilesNamespace}},
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("finding the current directory: %w", err)
	}
	cfg, err := f.resolve(cwd)
	if err != nil {
		return nil, err
	}
	cfg.Source = "default"
	return cfg, nil
}

// Parse reads a configuration from JSON or YAML text; relative paths resolve against
// baseDir. Unknown fields are refused.
func Parse(data []byte, baseDir string, o Overrides) (*Config, error) {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON or YAML: %w", err)
	}
	var f File
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, describeDecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one document")
	}
	if o.Workspace != "" {
		// A workspace flag is relative to where the command runs, not to the file.
		ws, err := filepath.Abs(o.Workspace)
		if err != nil {
			return nil, fmt.Errorf("--workspace: %w", err)
		}
		f.Workspace = ws
	}
	if o.ReadOnly {
		f.Grants = readOnlyGrants(f.Grants)
	}
	return f.resolve(baseDir)
}

// readOnlyGrants keeps only the files read actions of every capability (and any
// capability of other namespaces untouched), dropping capabilities left with none.
func readOnlyGrants(grants []policy.Grant) []policy.Grant {
	out := make([]policy.Grant, 0, len(grants))
	for _, g := range grants {
		var caps []policy.Capability
		for _, c := range g.Capabilities {
			if c.Resource.Namespace == FilesNamespace {
				var acts []string
				for _, a := range c.Actions {
					if a == policy.ActionAny {
						acts = append(acts, ReadActions()...)
					} else if isReadAction(a) {
						acts = append(acts, a)
					}
				}
				if len(acts) == 0 {
					continue
				}
				c.Actions = acts
			}
			caps = append(caps, c)
		}
		if len(caps) > 0 {
			g.Capabilities = caps
			out = append(out, g)
		}
	}
	return out
}

func isReadAction(a string) bool { return slices.Contains(ReadActions(), a) }

func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", msg)
	}
	return err
}

func (f File) resolve(baseDir string) (*Config, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(baseDir, p)
	}
	if f.Workspace == "" {
		return nil, errors.New("workspace: required (a directory)")
	}
	ws := abs(f.Workspace)
	st, err := os.Stat(ws)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workspace: %s is not a directory", ws)
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	if ws == "/" {
		return nil, errors.New("workspace: refusing / (the whole file system) as a workspace; run from a project directory or pass --workspace DIR")
	}
	cfg := &Config{Workspace: ws, Budgets: f.Budgets, HostDeny: f.HostDeny}
	cfg.StateDir, err = stateDir(f.StateDir, ws, abs)
	if err != nil {
		return nil, err
	}
	cfg.Context, err = f.Context.resolve()
	if err != nil {
		return nil, err
	}
	switch {
	case f.GrantsFile != "" && f.Grants != nil:
		return nil, errors.New("grants and grantsFile: give one or the other")
	case f.GrantsFile != "":
		cfg.Grants, err = policy.LoadGrants(abs(f.GrantsFile))
		if err != nil {
			return nil, fmt.Errorf("grantsFile: %w", err)
		}
	default:
		if err := policy.ValidateGrants(f.Grants); err != nil {
			return nil, err
		}
		cfg.Grants = f.Grants
	}
	if f.Namespaces.Enabled == nil && f.Namespaces.SettingsFile == "" {
		return nil, errors.New("namespaces.enabled: required (for example [\"files\"]); an empty list turns every namespace off")
	}
	if err := (policy.NamespacePatch{Enable: f.Namespaces.Enabled}).Validate(); err != nil {
		return nil, fmt.Errorf("namespaces.%w", err)
	}
	cfg.EnabledNamespaces = policy.NamespacePatch{Enable: f.Namespaces.Enabled}.Apply(nil)
	if f.Namespaces.SettingsFile != "" {
		cfg.NamespaceSettingsFile = abs(f.Namespaces.SettingsFile)
	}
	if f.Budgets.MaxToolCalls < 0 {
		return nil, errors.New("budgets.maxToolCalls: must not be negative (0 means unlimited)")
	}
	cfg.ToolPolicy = policy.DefaultToolPolicy()
	if f.ToolPolicy != nil {
		cfg.ToolPolicy, cfg.ToolPolicyDeclared = *f.ToolPolicy, true
	}
	for i, d := range f.HostDeny {
		if err := policy.ValidateToolName(strings.TrimSuffix(d, ".*")); err != nil {
			return nil, fmt.Errorf("hostDeny[%d]: %w", i, err)
		}
	}
	return cfg, nil
}

func (c FileContext) resolve() (policy.AccessContext, error) {
	actor, err := policy.ParseActor(c.Actor)
	if err != nil {
		return policy.AccessContext{}, fmt.Errorf("context.actor: %w", err)
	}
	ac := policy.AccessContext{
		NamespaceID: strings.TrimSpace(c.NamespaceID),
		Actor:       actor,
		Authority:   strings.TrimSpace(c.Authority),
		Owner:       strings.TrimSpace(c.Owner),
		Purpose:     strings.TrimSpace(c.Purpose),
	}
	return ac, ac.Validate()
}

// stateDir is where snapshots and file metadata live: the configured directory, else
// one per workspace under the user's state directory — or, when the workspace
// contains that (a workspace at HOME, say), under /var/tmp. It must be outside the
// workspace, so that the harness cannot reach it through the files tools.
func stateDir(configured, workspace string, abs func(string) string) (string, error) {
	if configured != "" {
		dir := abs(configured)
		if within(workspace, dir) {
			return "", fmt.Errorf("stateDir: %s is inside the workspace; it must be outside so that tools cannot reach it", dir)
		}
		return dir, nil
	}
	sum := sha256.Sum256([]byte(workspace))
	leaf := filepath.Join("sharedos-run", "workspaces", hex.EncodeToString(sum[:8]))
	var candidates []string
	if base := os.Getenv("XDG_STATE_HOME"); base != "" {
		candidates = append(candidates, filepath.Join(base, leaf))
	} else if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".local", "state", leaf))
	}
	candidates = append(candidates, filepath.Join("/var/tmp", fmt.Sprintf("sharedos-run-%d", os.Geteuid()), "workspaces", hex.EncodeToString(sum[:8])))
	for _, dir := range candidates {
		if !within(workspace, dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("stateDir: every default (%s) is inside the workspace %s; set stateDir in a run configuration", strings.Join(candidates, ", "), workspace)
}

// within reports whether p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Namespaces returns the namespace store the configuration names: file-backed when a
// settings file is configured (seeded from enabled if the file is new), else in memory.
func (c *Config) Namespaces(ctx context.Context) (policy.NamespaceStore, error) {
	if c.NamespaceSettingsFile == "" {
		return policy.NewMemoryNamespaces(c.EnabledNamespaces), nil
	}
	store := policy.NewFileNamespaces(c.NamespaceSettingsFile)
	if _, err := os.Stat(c.NamespaceSettingsFile); errors.Is(err, os.ErrNotExist) {
		if _, err := store.Patch(ctx, policy.NamespacePatch{Enable: c.EnabledNamespaces}); err != nil {
			return nil, err
		}
	}
	return store, nil
}

// PolicyHash is the hash of the configuration's ToolPolicy.
func (c *Config) PolicyHash() (string, error) { return c.ToolPolicy.Hash() }
