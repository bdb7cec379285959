// Package files is the built-in `files` namespace — the twelve managed `files.*`
// tools over a real workspace directory.
//
// Every access to the workspace goes through an *os.Root, which refuses any
// operation whose path, after following symbolic links, would leave the workspace.
// That guarantee holds per operation, so a path swapped for a symlink between a
// check and its use still cannot escape. On top of it the package resolves paths
// itself (resolve) so that an escaping symlink is reported clearly as "path escapes
// the workspace" and so that writes meant for an in-workspace symlink land on its
// target; the resolution is only ever advisory, never the safety boundary.
//
// State that must not be reachable from the workspace — file metadata and
// snapshots — lives in a separate state directory, opened as a second root.
//
// Limits (the zero value of each Options field selects the default):
//
//   - MaxReadBytes (1 MiB): files.read refuses larger files and points at files.grep.
//   - MaxResultBytes (256 KiB): files.list, files.search and files.grep stop adding
//     entries past this many bytes of JSON and say truncated:true.
//   - MaxScanBytes (8 MiB): files.search and files.grep skip larger files and list them.
//   - MaxSnapshotBytes (64 MiB): files.snapshot.create refuses a larger snapshot.
//   - files.grep returns at most 1000 matches and cuts lines longer than 1000 bytes,
//     ending them with "…".
//
// Content given to files.create, files.replace and files.append is written as is
// when it is a JSON string; any other JSON value is written as its compact JSON
// encoding (encoding/json: object keys in byte order, no HTML escaping).
//
// Symlinks: a link whose target stays inside the workspace is followed (reads,
// and replace/append/restore write to its target); files.delete removes the link
// itself. A link with an absolute target is refused even if that target happens to
// be inside the workspace, as os.Root refuses it; so is any link that climbs out.
// files.list shows links as kind "symlink"; search, grep and snapshots never follow
// them (no cycles, no escapes).
//
// Metadata (files.create, files.append) is stored in the state directory keyed by
// the file's resolved location, returned by files.stat, kept by files.replace,
// replaced wholesale by files.append when given, and removed by files.delete.
//
// Outputs are deterministic: entries and results in byte order of names, paths
// compared segment by segment, and search ties broken by path.
package files

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

// Defaults for the zero Options limits.
const (
	DefaultMaxReadBytes     int64 = 1 << 20
	DefaultMaxResultBytes         = 256 << 10
	DefaultMaxScanBytes     int64 = 8 << 20
	DefaultMaxSnapshotBytes int64 = 64 << 20

	// MaxGrepMatches bounds files.grep independently of bytes, so that a pattern
	// matching every short line cannot make the walk run to the end of a large tree.
	MaxGrepMatches = 1000
	// MaxLineBytes is where files.grep cuts a line (and its context lines).
	MaxLineBytes = 1000
)

// Options configures a workspace.
type Options struct {
	// Workspace is the directory the tools act on; it is opened with os.OpenRoot.
	Workspace string
	// StateDir holds snapshots and file metadata. It must lie outside the workspace
	// (otherwise the agent could rewrite its own snapshots) and is created if missing.
	StateDir string

	// MaxReadBytes caps files.read (default 1 MiB).
	MaxReadBytes int64
	// MaxResultBytes caps the JSON size of list, search and grep results (default 256 KiB).
	MaxResultBytes int
	// MaxScanBytes is the largest file search and grep will scan (default 8 MiB).
	MaxScanBytes int64
	// MaxSnapshotBytes caps the total content of one snapshot (default 64 MiB).
	MaxSnapshotBytes int64
}

// Workspace holds the open root; Close releases it.
type Workspace struct {
	root  *os.Root
	state *os.Root
	opts  Options
	defs  []toolDef

	// mu serialises every mutation (workspace files, metadata, snapshots) so that a
	// version check and the write it guards are one step for concurrent callers.
	// Reads take no lock: each read uses a single open file descriptor, so its
	// content and version always agree.
	mu sync.Mutex
}

//go:embed tools.json
var toolsJSON embed.FS

// toolDef is the published face of one tool, copied from the SharedOS wire vectors.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Open opens the workspace and the state directory.
func Open(opts Options) (*Workspace, error) {
	if opts.Workspace == "" {
		return nil, errors.New("files: a workspace directory is required")
	}
	if opts.StateDir == "" {
		return nil, errors.New("files: a state directory is required")
	}
	if opts.MaxReadBytes < 0 || opts.MaxResultBytes < 0 || opts.MaxScanBytes < 0 || opts.MaxSnapshotBytes < 0 {
		return nil, errors.New("files: limits must not be negative")
	}
	if opts.MaxReadBytes == 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	if opts.MaxResultBytes == 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.MaxScanBytes == 0 {
		opts.MaxScanBytes = DefaultMaxScanBytes
	}
	if opts.MaxSnapshotBytes == 0 {
		opts.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	data, err := toolsJSON.ReadFile("tools.json")
	if err != nil {
		return nil, fmt.Errorf("files: tool definitions: %w", err)
	}
	var defs []toolDef
	if err := json.Unmarshal(data, &defs); err != nil {
		return nil, fmt.Errorf("files: tool definitions: %w", err)
	}
	wsReal, err := realDir(opts.Workspace)
	if err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	// The state directory is checked before it is created, so that a refused
	// configuration leaves nothing behind in the workspace, and again after, in
	// case a symlink on the way changed meanwhile.
	checkState := func() (string, error) {
		stateReal, err := realPath(opts.StateDir)
		if err != nil {
			return "", fmt.Errorf("files: state directory: %w", err)
		}
		if within(wsReal, stateReal) {
			return "", fmt.Errorf("files: the state directory %s is inside the workspace %s; it must be outside it", opts.StateDir, opts.Workspace)
		}
		if within(stateReal, wsReal) {
			return "", fmt.Errorf("files: the workspace %s is inside the state directory %s", opts.Workspace, opts.StateDir)
		}
		return stateReal, nil
	}
	if _, err := checkState(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("files: state directory: %w", err)
	}
	stateReal, err := checkState()
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(wsReal)
	if err != nil {
		return nil, fmt.Errorf("files: workspace: %w", err)
	}
	state, err := os.OpenRoot(stateReal)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("files: state directory: %w", err)
	}
	for _, dir := range []string{metadataDir, snapshotsDir} {
		if err := state.MkdirAll(dir, 0o700); err != nil {
			root.Close()
			state.Close()
			return nil, fmt.Errorf("files: state directory: %w", err)
		}
	}
	return &Workspace{root: root, state: state, opts: opts, defs: defs}, nil
}

// realDir is the absolute, symlink-free form of an existing directory.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return filepath.Clean(real), nil
}

// realPath is the symlink-free absolute form of p, which need not exist yet: the
// longest existing prefix is resolved and the rest appended.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// within reports whether p is parent or lies below it.
func within(parent, p string) bool {
	rel, err := filepath.Rel(parent, p)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// Close releases the workspace and state directory.
func (w *Workspace) Close() error {
	return errors.Join(w.root.Close(), w.state.Close())
}

// toolSpec is the private half of a tool: what it does and how it is classed.
type toolSpec struct {
	action      string
	readWrite   kernel.ReadWrite
	destructive bool
	handler     func(w *Workspace, inv invocation) (any, error)
}

// specs maps each published tool to its action, class and handler. It is built per
// call so that the package holds no mutable state.
func specs() map[string]toolSpec {
	return map[string]toolSpec{
		"files.list":             {"list", kernel.Read, false, (*Workspace).list},
		"files.stat":             {"stat", kernel.Read, false, (*Workspace).stat},
		"files.read":             {"read", kernel.Read, false, (*Workspace).read},
		"files.search":           {"search", kernel.Read, false, (*Workspace).search},
		"files.grep":             {"grep", kernel.Read, false, (*Workspace).grep},
		"files.create":           {"create", kernel.Write, false, (*Workspace).create},
		"files.replace":          {"replace", kernel.Write, true, (*Workspace).replace},
		"files.append":           {"append", kernel.Write, false, (*Workspace).append},
		"files.delete":           {"delete", kernel.Write, true, (*Workspace).delete},
		"files.snapshot.create":  {"snapshot:create", kernel.Write, false, (*Workspace).snapshotCreate},
		"files.snapshot.list":    {"snapshot:list", kernel.Read, false, (*Workspace).snapshotList},
		"files.snapshot.restore": {"snapshot:restore", kernel.Write, true, (*Workspace).snapshotRestore},
	}
}

// Tools returns the twelve kernel.Tool values (namespace "files", source "sharedos"),
// sorted by name.
func (w *Workspace) Tools() []kernel.Tool {
	all := specs()
	out := make([]kernel.Tool, 0, len(w.defs))
	for _, d := range w.defs {
		s, ok := all[d.Name]
		if !ok {
			continue
		}
		action := s.action
		run := s.handler
		t := kernel.Tool{
			Name:        d.Name,
			Description: d.Description,
			InputSchema: slices.Clone(d.InputSchema),
			Namespace:   "files",
			Source:      "sharedos",
			ReadWrite:   s.readWrite,
			Ceiling: policy.Capability{
				Resource: policy.Resource{Namespace: "files", Path: []string{}},
				Actions:  []string{action},
				Scope:    policy.ScopeDescendants,
			},
			Requirement: func(args map[string]any, _ policy.AccessContext) (policy.Requirement, error) {
				p, err := pathArg(args)
				if err != nil {
					return policy.Requirement{}, err
				}
				return policy.Requirement{Resource: policy.Resource{Namespace: "files", Path: p}, Action: action}, nil
			},
			Handler: func(ctx context.Context, inv kernel.Invocation) (any, error) {
				p, err := pathArg(inv.Arguments)
				if err != nil {
					return nil, &kernel.ToolError{Message: err.Error()}
				}
				return run(w, invocation{ctx: ctx, args: inv.Arguments, path: p})
			},
		}
		if s.destructive {
			t.Destructive = new(true)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b kernel.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// invocation is what a handler needs: the call's context, its arguments and its
// validated path.
type invocation struct {
	ctx  context.Context
	args map[string]any
	path []string
}

// pathArg reads and validates the path argument. The kernel has already checked
// the schema, but a handler may be called directly, so the shape is checked again.
func pathArg(args map[string]any) ([]string, error) {
	raw, ok := args["path"]
	if !ok {
		return nil, errors.New("path is required (an array of segments; [] is the workspace root)")
	}
	var p []string
	switch v := raw.(type) {
	case []any:
		p = make([]string, 0, len(v))
		for i, s := range v {
			str, ok := s.(string)
			if !ok {
				return nil, fmt.Errorf("path[%d] must be a string", i)
			}
			p = append(p, str)
		}
	case []string:
		p = slices.Clone(v)
		if p == nil {
			p = []string{}
		}
	default:
		return nil, errors.New("path must be an array of strings")
	}
	if err := policy.ValidatePath(p); err != nil {
		return nil, err
	}
	return p, nil
}

func stringArg(args map[string]any, name string) (string, bool, error) {
	raw, ok := args[name]
	if !ok || raw == nil {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", false, fmt.Errorf("%s must be a string", name)
	}
	return s, true, nil
}

func boolArg(args map[string]any, name string, def bool) (bool, error) {
	raw, ok := args[name]
	if !ok || raw == nil {
		return def, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return false, fmt.Errorf("%s must be a boolean", name)
	}
	return b, nil
}

func intArg(args map[string]any, name string, def, lo, hi int) (int, error) {
	raw, ok := args[name]
	if !ok || raw == nil {
		return def, nil
	}
	var n int
	switch v := raw.(type) {
	case float64:
		if v != float64(int(v)) {
			return 0, fmt.Errorf("%s must be an integer", name)
		}
		n = int(v)
	case int:
		n = v
	case json.Number:
		i, err := v.Int64()
		if err != nil {
			return 0, fmt.Errorf("%s must be an integer", name)
		}
		n = int(i)
	default:
		return 0, fmt.Errorf("%s must be an integer", name)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s must be between %d and %d, got %d", name, lo, hi, n)
	}
	return n, nil
}

func objectArg(args map[string]any, name string) (map[string]any, bool, error) {
	raw, ok := args[name]
	if !ok || raw == nil {
		return nil, false, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("%s must be an object", name)
	}
	return m, true, nil
}

// contentArg turns the content argument into bytes: a string as is, anything else
// as compact JSON without HTML escaping (SharedOS writes JSON.stringify's output).
func contentArg(args map[string]any) ([]byte, error) {
	raw, ok := args["content"]
	if !ok {
		return nil, &kernel.ToolError{Message: "content is required"}
	}
	if s, ok := raw.(string); ok {
		return []byte(s), nil
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(raw); err != nil {
		return nil, &kernel.ToolError{Message: "content cannot be encoded as JSON: " + err.Error()}
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// display renders a path for messages.
func display(p []string) string {
	return fmt.Sprintf("%q", "/"+strings.Join(p, "/"))
}

// rootName is the name os.Root methods take for a slash-separated relative path.
func rootName(segs []string) string {
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "/")
}

func toolErr(format string, args ...any) *kernel.ToolError {
	return &kernel.ToolError{Message: fmt.Sprintf(format, args...)}
}

// errEscape marks a path that would leave the workspace.
var errEscape = errors.New("path escapes the workspace")

// isEscape recognises both our own verdict and os.Root's, whose sentinel error is
// unexported and can only be known by its text.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e == errEscape || e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// fsErr turns a filesystem error about p into a message that names the logical path
// and never the host's directory layout.
func fsErr(p []string, err error) error {
	var te *kernel.ToolError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return err
	case isEscape(err):
		return toolErr("%s: path escapes the workspace (a symbolic link on the way points outside it)", display(p))
	case errors.Is(err, fs.ErrNotExist):
		return toolErr("%s does not exist", display(p))
	case errors.Is(err, syscall.ENOTDIR):
		return toolErr("%s: a parent of this path is not a directory", display(p))
	case errors.Is(err, syscall.ELOOP):
		return toolErr("%s: too many levels of symbolic links", display(p))
	case errors.Is(err, fs.ErrPermission):
		return toolErr("%s: permission denied", display(p))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %s: %v", display(p), pe.Op, pe.Err)
	}
	return fmt.Errorf("%s: %v", display(p), err)
}

// maxLinks bounds symlink resolution as the kernel does (Linux MAXSYMLINKS).
const maxLinks = 40

// resolve maps logical segments to a symlink-free name inside the root, following
// symlinks the way the kernel would but refusing absolute targets and any ".." that
// climbs above the root. A missing component ends resolution: the rest is appended
// as is (it cannot contain links), so create can name a path that does not exist yet.
// The answer may be stale by the time it is used; that is safe because the name is
// only ever handed to os.Root, which re-checks every component.
func (w *Workspace) resolve(segs []string) (string, error) {
	resolved := make([]string, 0, len(segs))
	pending := slices.Clone(segs)
	links := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(resolved) == 0 {
				return "", errEscape
			}
			resolved = resolved[:len(resolved)-1]
			continue
		}
		cand := append(slices.Clone(resolved), c)
		fi, err := w.root.Lstat(rootName(cand))
		if errors.Is(err, fs.ErrNotExist) {
			if slices.Contains(pending, "..") {
				return "", err
			}
			return rootName(append(cand, pending...)), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(pending) > 0 && !fi.IsDir() {
				return "", syscall.ENOTDIR
			}
			resolved = cand
			continue
		}
		if links++; links > maxLinks {
			return "", syscall.ELOOP
		}
		target, err := w.root.Readlink(rootName(cand))
		if err != nil {
			return "", err
		}
		target = filepath.ToSlash(target)
		if path.IsAbs(target) || filepath.IsAbs(target) || filepath.VolumeName(target) != "" {
			return "", errEscape
		}
		pending = append(strings.Split(target, "/"), pending...)
	}
	return rootName(resolved), nil
}

// splitName is the inverse of rootName.
func splitName(name string) []string {
	if name == "." || name == "" {
		return []string{}
	}
	return strings.Split(name, "/")
}

// parentName is the directory of a root name ("." for top-level entries).
func parentName(name string) string {
	return path.Dir(name)
}

// version is the content version the tools publish: lowercase hex SHA-256.
func version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// hashReader versions a stream and counts it.
func hashReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hexSum(h), n, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkVersion answers a stale expectedVersion with a retryable conflict.
func checkVersion(expected string, have bool, current string) error {
	if !have || expected == current {
		return nil
	}
	if current == "" {
		current = "none (the file does not exist)"
	}
	return &kernel.ToolError{Message: fmt.Sprintf("version conflict: expected %s, current %s", expected, current), Retryable: true}
}
