package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

// NamespacePatch enables and disables tool namespaces. Applying it twice changes
// nothing the second time. Enabling a namespace is never authority: it only lets the
// namespace's tools be considered.
type NamespacePatch struct {
	Enable  []string `json:"enable,omitempty"`
	Disable []string `json:"disable,omitempty"`
}

// Validate refuses empty names and a namespace that is both enabled and disabled.
func (p NamespacePatch) Validate() error {
	for i, ns := range p.Enable {
		if _, err := NormalizeIdentifier(fmt.Sprintf("enable[%d]", i), ns); err != nil {
			return err
		}
		if slices.Contains(p.Disable, ns) {
			return fmt.Errorf("namespace %q is both enabled and disabled in one patch", ns)
		}
	}
	for i, ns := range p.Disable {
		if _, err := NormalizeIdentifier(fmt.Sprintf("disable[%d]", i), ns); err != nil {
			return err
		}
	}
	return nil
}

// Apply returns the sorted set of enabled namespaces after the patch.
func (p NamespacePatch) Apply(enabled []string) []string {
	out := slices.Clone(enabled)
	for _, ns := range p.Enable {
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	out = slices.DeleteFunc(out, func(ns string) bool { return slices.Contains(p.Disable, ns) })
	slices.Sort(out)
	return slices.Compact(out)
}

// NamespaceStore holds which tool namespaces are enabled. The kernel reads it at
// discovery and again at every call, so a namespace switched off mid-turn stops
// serving at once.
type NamespaceStore interface {
	Enabled(ctx context.Context) ([]string, error)
	Patch(ctx context.Context, p NamespacePatch) ([]string, error)
}

// MemoryNamespaces is a NamespaceStore for one process.
type MemoryNamespaces struct {
	mu      sync.Mutex
	enabled []string
}

// NewMemoryNamespaces starts with the given namespaces enabled.
func NewMemoryNamespaces(enabled []string) *MemoryNamespaces {
	return &MemoryNamespaces{enabled: NamespacePatch{Enable: enabled}.Apply(nil)}
}

// Enabled returns a copy of the enabled set.
func (m *MemoryNamespaces) Enabled(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.enabled), nil
}

// Patch applies p atomically.
func (m *MemoryNamespaces) Patch(_ context.Context, p NamespacePatch) ([]string, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.enabled = p.Apply(m.enabled)
	return slices.Clone(m.enabled), nil
}

// FileNamespaces keeps the enabled set in a JSON file ({"enabled":[...]}) shared by
// processes. A patch takes an exclusive lock on a sibling lock file, reads the
// current state fresh, and replaces the file by rename, so two concurrent writers
// both land and a reader never sees a half-written file.
type FileNamespaces struct {
	path string
}

// lockRetry is how often a waiting writer retries the settings lock.
const lockRetry = 5 * time.Millisecond

type namespaceFile struct {
	Enabled []string `json:"enabled"`
}

// NewFileNamespaces uses the file at path; a missing file means nothing is enabled
// until Init or a patch writes one.
func NewFileNamespaces(path string) *FileNamespaces { return &FileNamespaces{path: path} }

// Path is the settings file.
func (f *FileNamespaces) Path() string { return f.path }

// Enabled reads the file; a missing file is an empty set.
func (f *FileNamespaces) Enabled(context.Context) ([]string, error) {
	return f.read()
}

func (f *FileNamespaces) read() ([]string, error) {
	data, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace settings: %w", err)
	}
	var nf namespaceFile
	if err := json.Unmarshal(data, &nf); err != nil {
		return nil, fmt.Errorf("namespace settings %s: %w", f.path, err)
	}
	return NamespacePatch{Enable: nf.Enabled}.Apply(nil), nil
}

// Patch applies p under the file lock.
func (f *FileNamespaces) Patch(ctx context.Context, p NamespacePatch) ([]string, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return nil, fmt.Errorf("creating namespace settings directory: %w", err)
	}
	lock := flock.New(f.path + ".lock")
	if _, err := lock.TryLockContext(ctx, lockRetry); err != nil {
		return nil, fmt.Errorf("locking namespace settings: %w", err)
	}
	defer lock.Unlock()
	current, err := f.read()
	if err != nil {
		return nil, err
	}
	next := p.Apply(current)
	data, err := json.Marshal(namespaceFile{Enabled: next})
	if err != nil {
		return nil, fmt.Errorf("encoding namespace settings: %w", err)
	}
	if err := writeFileAtomic(f.path, append(data, '\n')); err != nil {
		return nil, fmt.Errorf("writing namespace settings: %w", err)
	}
	return next, nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
