package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// Snapshots live in StateDir/snapshots/<id>/: manifest.json and blobs/<version>.
// A snapshot is assembled in a ".tmp-" directory and renamed into place, so a
// listing never sees half of one.
//
// Only regular files and directories are captured. Symlinks are recorded in the
// manifest (path and target) but never followed and never restored: restoring a
// link would let a snapshot plant a path that leads elsewhere. Other entries
// (devices, FIFOs, sockets) are left out.
//
// Restoring a directory writes every file of the snapshot below the path (each
// atomically) and recreates its directories; files that exist now but are not in
// the snapshot are left alone, so a restore never deletes work done since.

type manifestFile struct {
	Path    []string `json:"path"`
	Version string   `json:"version"`
	Size    int64    `json:"size"`
}

type manifestLink struct {
	Path   []string `json:"path"`
	Target string   `json:"target"`
}

type manifest struct {
	ID          string         `json:"id"`
	Path        []string       `json:"path"`
	Label       string         `json:"label"`
	CreatedAt   time.Time      `json:"createdAt"`
	Kind        string         `json:"kind"`
	Files       []manifestFile `json:"files"`
	Directories [][]string     `json:"directories"`
	Symlinks    []manifestLink `json:"symlinks"`
	Bytes       int64          `json:"bytes"`
}

// maxLabelBytes keeps labels to something a listing can show.
const maxLabelBytes = 1024

// snapshotIDLayout is the time part of an id; ids sort by creation second.
const snapshotIDLayout = "20060102T150405Z"

func newSnapshotID(t time.Time) string {
	return "snap-" + t.UTC().Format(snapshotIDLayout) + "-" + randomHex(4)
}

// validSnapshotID accepts exactly the ids newSnapshotID makes. The id becomes a
// directory name in the state directory, so nothing else may pass.
func validSnapshotID(id string) bool {
	const prefix = "snap-"
	if len(id) != len(prefix)+len(snapshotIDLayout)+1+8 || !strings.HasPrefix(id, prefix) {
		return false
	}
	rest := id[len(prefix):]
	if _, err := time.Parse(snapshotIDLayout, rest[:len(snapshotIDLayout)]); err != nil {
		return false
	}
	rest = rest[len(snapshotIDLayout):]
	if rest[0] != '-' {
		return false
	}
	for _, c := range []byte(rest[1:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

type snapshotSummary struct {
	SnapshotID string   `json:"snapshotId"`
	Path       []string `json:"path"`
	Label      string   `json:"label"`
	CreatedAt  string   `json:"createdAt"`
	Files      int      `json:"files"`
	Bytes      int64    `json:"bytes"`
}

func (m *manifest) summary() snapshotSummary {
	return snapshotSummary{SnapshotID: m.ID, Path: m.Path, Label: m.Label, CreatedAt: formatTime(m.CreatedAt), Files: len(m.Files), Bytes: m.Bytes}
}

type snapshotCreateOutput struct {
	SnapshotID string   `json:"snapshotId"`
	Path       []string `json:"path"`
	Label      string   `json:"label"`
	Files      int      `json:"files"`
	Bytes      int64    `json:"bytes"`
}

// snapshotWriter copies workspace files into a snapshot being assembled.
type snapshotWriter struct {
	w    *Workspace
	base []string
	dir  string // the snapshot's temporary directory in the state root
	m    *manifest
	left int64
}

func (w *Workspace) snapshotCreate(inv invocation) (any, error) {
	label, _, err := stringArg(inv.args, "label")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	if len(label) > maxLabelBytes {
		return nil, toolErr("label is %d bytes; at most %d are allowed", len(label), maxLabelBytes)
	}
	// The lock makes the snapshot a consistent cut with respect to this
	// workspace's own writes.
	w.mu.Lock()
	defer w.mu.Unlock()
	name, err := w.resolve(inv.path)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	fi, err := w.root.Stat(name)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	now := time.Now().UTC()
	m := &manifest{ID: newSnapshotID(now), Path: inv.path, Label: label, CreatedAt: now,
		Files: []manifestFile{}, Directories: [][]string{}, Symlinks: []manifestLink{}}
	sw := &snapshotWriter{w: w, base: inv.path, dir: snapshotsDir + "/.tmp-" + m.ID, m: m, left: w.opts.MaxSnapshotBytes}
	if err := w.state.MkdirAll(sw.dir+"/blobs", 0o700); err != nil {
		return nil, fmt.Errorf("creating snapshot: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = w.state.RemoveAll(sw.dir)
		}
	}()
	switch {
	case fi.Mode().IsRegular():
		m.Kind = kindFile
		err = sw.copyFile(name, []string{})
	case fi.IsDir():
		m.Kind = kindDirectory
		err = sw.copyTree(inv, name, []string{})
	default:
		err = toolErr("%s is neither a file nor a directory", display(inv.path))
	}
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding snapshot manifest: %w", err)
	}
	if err := w.state.WriteFile(sw.dir+"/manifest.json", data, 0o600); err != nil {
		return nil, fmt.Errorf("writing snapshot manifest: %w", err)
	}
	if err := w.state.Rename(sw.dir, snapshotsDir+"/"+m.ID); err != nil {
		return nil, fmt.Errorf("storing snapshot: %w", err)
	}
	done = true
	return snapshotCreateOutput{SnapshotID: m.ID, Path: m.Path, Label: m.Label, Files: len(m.Files), Bytes: m.Bytes}, nil
}

func (sw *snapshotWriter) copyTree(inv invocation, name string, rel []string) error {
	if err := inv.ctx.Err(); err != nil {
		return err
	}
	full := append(slices.Clone(sw.base), rel...)
	f, err := sw.w.root.Open(name)
	if err != nil {
		return fsErr(full, err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return fsErr(full, err)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, d := range ents {
		childRel := append(slices.Clone(rel), d.Name())
		childName := d.Name()
		if name != "." {
			childName = name + "/" + d.Name()
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			target, err := sw.w.root.Readlink(childName)
			if err != nil {
				return fsErr(append(slices.Clone(sw.base), childRel...), err)
			}
			sw.m.Symlinks = append(sw.m.Symlinks, manifestLink{Path: childRel, Target: target})
		case t.IsDir():
			sw.m.Directories = append(sw.m.Directories, childRel)
			if err := sw.copyTree(inv, childName, childRel); err != nil {
				return err
			}
		case t.IsRegular():
			if err := sw.copyFile(childName, childRel); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyFile streams one file into the snapshot's blobs, charging it to the size cap.
func (sw *snapshotWriter) copyFile(name string, rel []string) error {
	full := append(slices.Clone(sw.base), rel...)
	f, fi, err := sw.w.openRead(name)
	if err != nil {
		return fsErr(full, err)
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		return toolErr("%s is not a regular file", display(full))
	}
	tooBig := toolErr("snapshot of %s would exceed %d bytes; snapshot a smaller path", display(sw.base), sw.w.opts.MaxSnapshotBytes)
	if fi.Size() > sw.left {
		return tooBig
	}
	tmp := sw.dir + "/blobs/.tmp-" + randomHex(8)
	out, err := sw.w.state.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	// The file may grow after Stat; copying one byte past the cap notices.
	v, n, err := hashReader(io.TeeReader(io.LimitReader(f, sw.left+1), out))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n <= sw.left {
		err = sw.w.state.Rename(tmp, sw.dir+"/blobs/"+v)
	}
	if err != nil || n > sw.left {
		_ = sw.w.state.Remove(tmp)
		if err == nil {
			return tooBig
		}
		return fmt.Errorf("copying %s into the snapshot: %w", display(full), err)
	}
	sw.left -= n
	sw.m.Bytes += n
	sw.m.Files = append(sw.m.Files, manifestFile{Path: rel, Version: v, Size: n})
	return nil
}

// loadManifest reads a snapshot's manifest; a missing snapshot is a user error.
func (w *Workspace) loadManifest(id string) (*manifest, error) {
	if !validSnapshotID(id) {
		return nil, toolErr("snapshot id %q is not valid; ids look like snap-20060102T150405Z-0123abcd", id)
	}
	data, err := w.state.ReadFile(snapshotsDir + "/" + id + "/manifest.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, toolErr("snapshot %q does not exist", id)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil || m.ID != id {
		return nil, fmt.Errorf("snapshot %s is damaged: its manifest cannot be read", id)
	}
	return &m, nil
}

type snapshotListOutput struct {
	Path      []string          `json:"path"`
	Snapshots []snapshotSummary `json:"snapshots"`
}

func (w *Workspace) snapshotList(inv invocation) (any, error) {
	limit, err := intArg(inv.args, "limit", 20, 1, 100)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	dir, err := w.state.Open(snapshotsDir)
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return nil, fmt.Errorf("listing snapshots: %w", err)
	}
	var found []*manifest
	for _, n := range names {
		if !validSnapshotID(n) {
			continue
		}
		m, err := w.loadManifest(n)
		if err != nil {
			// Another snapshot being damaged must not hide the rest.
			continue
		}
		if slices.Equal(m.Path, inv.path) {
			found = append(found, m)
		}
	}
	slices.SortFunc(found, func(a, b *manifest) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	out := snapshotListOutput{Path: inv.path, Snapshots: []snapshotSummary{}}
	for _, m := range found[:min(len(found), limit)] {
		out.Snapshots = append(out.Snapshots, m.summary())
	}
	return out, nil
}

type snapshotRestoreOutput struct {
	Path       []string `json:"path"`
	SnapshotID string   `json:"snapshotId"`
	Restored   int      `json:"restored"`
	Version    string   `json:"version,omitempty"`
}

// blob reads a file's content out of a snapshot and checks it is what was saved.
func (w *Workspace) blob(m *manifest, f manifestFile) ([]byte, error) {
	data, err := w.state.ReadFile(snapshotsDir + "/" + m.ID + "/blobs/" + f.Version)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s is damaged: content of %s: %w", m.ID, display(append(slices.Clone(m.Path), f.Path...)), err)
	}
	if version(data) != f.Version {
		return nil, fmt.Errorf("snapshot %s is damaged: content of %s does not match its version", m.ID, display(append(slices.Clone(m.Path), f.Path...)))
	}
	return data, nil
}

func (w *Workspace) snapshotRestore(inv invocation) (any, error) {
	p := inv.path
	if len(p) == 0 {
		return nil, toolErr("files.snapshot.restore needs a path of at least one segment")
	}
	id, _, err := stringArg(inv.args, "snapshotId")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	expected, hasExpected, err := stringArg(inv.args, "expectedVersion")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	m, err := w.loadManifest(id)
	if err != nil {
		return nil, err
	}
	if len(m.Path) > len(p) || !slices.Equal(m.Path, p[:len(m.Path)]) {
		return nil, toolErr("snapshot %s is of %s, which is neither %s nor a directory above it", id, display(m.Path), display(p))
	}
	rel := p[len(m.Path):]
	w.mu.Lock()
	defer w.mu.Unlock()
	if i := slices.IndexFunc(m.Files, func(f manifestFile) bool { return slices.Equal(f.Path, rel) }); i >= 0 {
		return w.restoreFile(p, m, m.Files[i], expected, hasExpected)
	}
	if m.Kind == kindFile {
		return nil, toolErr("snapshot %s is of the single file %s", id, display(m.Path))
	}
	below := func(q []string) bool { return len(q) > len(rel) && slices.Equal(q[:len(rel)], rel) }
	isDir := len(rel) == 0 || slices.ContainsFunc(m.Directories, func(d []string) bool { return slices.Equal(d, rel) })
	if !isDir {
		return nil, toolErr("snapshot %s holds nothing at %s", id, display(p))
	}
	if hasExpected {
		return nil, toolErr("%s is a directory in snapshot %s; expectedVersion applies to files", display(p), id)
	}
	name, err := w.resolve(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if err := w.root.MkdirAll(name, 0o755); err != nil {
		return nil, fsErr(p, err)
	}
	sub := func(q []string) string { return name + "/" + strings.Join(q[len(rel):], "/") }
	for _, d := range m.Directories {
		if below(d) {
			if err := w.root.MkdirAll(sub(d), 0o755); err != nil {
				return nil, fsErr(append(slices.Clone(m.Path), d...), err)
			}
		}
	}
	restored := 0
	for _, f := range m.Files {
		if !below(f.Path) {
			continue
		}
		full := append(slices.Clone(m.Path), f.Path...)
		data, err := w.blob(m, f)
		if err != nil {
			return nil, err
		}
		target := sub(f.Path)
		perm := fs.FileMode(0o644)
		if fi, err := w.root.Lstat(target); err == nil {
			if fi.IsDir() {
				return nil, toolErr("%s is a directory now but a file in snapshot %s; restored %d files before stopping", display(full), id, restored)
			}
			perm = fi.Mode().Perm()
		}
		if err := w.writeAtomic(target, data, perm); err != nil {
			return nil, toolErr("%v; restored %d files before stopping", fsErr(full, err), restored)
		}
		restored++
	}
	return snapshotRestoreOutput{Path: p, SnapshotID: id, Restored: restored}, nil
}

// restoreFile puts one file back. A path that is a symlink inside the workspace is
// restored through to its target, as files.replace would.
func (w *Workspace) restoreFile(p []string, m *manifest, f manifestFile, expected string, hasExpected bool) (any, error) {
	data, err := w.blob(m, f)
	if err != nil {
		return nil, err
	}
	name, err := w.resolve(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	current, perm := "", fs.FileMode(0o644)
	_, err = w.root.Stat(name)
	switch {
	case err == nil:
		if current, perm, err = w.currentVersion(p, name, ""); err != nil {
			return nil, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fsErr(p, err)
	}
	if err := checkVersion(expected, hasExpected, current); err != nil {
		return nil, err
	}
	if dir := parentName(name); dir != "." {
		if err := w.mkdirAll(p, dir); err != nil {
			return nil, err
		}
	}
	if err := w.writeAtomic(name, data, perm); err != nil {
		return nil, fsErr(p, err)
	}
	return snapshotRestoreOutput{Path: p, SnapshotID: m.ID, Restored: 1, Version: f.Version}, nil
}
