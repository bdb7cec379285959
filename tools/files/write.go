package files

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// tmpPrefix names the temporary files of atomic writes; they live next to their
// target so that the final rename never crosses a filesystem.
const tmpPrefix = ".sharedos-tmp-"

// writeAtomic replaces name with data: a reader sees the old content or the new,
// never a mix. If name is a symlink the link itself is replaced, which is why
// callers pass a resolved name when they mean the link's target.
func (w *Workspace) writeAtomic(name string, data []byte, perm fs.FileMode) error {
	tmp := path.Join(path.Dir(name), tmpPrefix+randomHex(8))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.root.Rename(tmp, name)
	}
	if err != nil {
		_ = w.root.Remove(tmp)
	}
	return err
}

// resolveParent resolves everything but the last segment, so that an operation on
// the path acts on the entry itself even when that entry is a symlink.
func (w *Workspace) resolveParent(p []string) (string, error) {
	parent, err := w.resolve(p[:len(p)-1])
	if err != nil {
		return "", err
	}
	if parent == "." {
		return p[len(p)-1], nil
	}
	return parent + "/" + p[len(p)-1], nil
}

// currentVersion hashes the regular file at name. It reports a directory or other
// non-file as a clear error naming the tool's intent.
func (w *Workspace) currentVersion(p []string, name, verb string) (string, fs.FileMode, error) {
	f, fi, err := w.openRead(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, toolErr("%s does not exist; %s", display(p), verb)
		}
		return "", 0, fsErr(p, err)
	}
	defer f.Close()
	if fi.IsDir() {
		return "", 0, toolErr("%s is a directory; versions and content are for files", display(p))
	}
	if !fi.Mode().IsRegular() {
		return "", 0, toolErr("%s is not a regular file", display(p))
	}
	v, _, err := hashReader(f)
	if err != nil {
		return "", 0, fsErr(p, err)
	}
	return v, fi.Mode().Perm(), nil
}

type createOutput struct {
	Path    []string `json:"path"`
	Version string   `json:"version"`
	Size    int64    `json:"size"`
	Created bool     `json:"created"`
}

func (w *Workspace) create(inv invocation) (any, error) {
	p := inv.path
	if len(p) == 0 {
		return nil, toolErr("files.create needs a path of at least one segment")
	}
	data, err := contentArg(inv.args)
	if err != nil {
		return nil, err
	}
	md, _, err := objectArg(inv.args, "metadata")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	name, err := w.resolveParent(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if dir := path.Dir(name); dir != "." {
		if err := w.mkdirAll(p, dir); err != nil {
			return nil, err
		}
	}
	// O_EXCL refuses an existing entry of any kind, a symlink included, so a racing
	// writer cannot be overwritten and a planted link cannot be written through.
	f, err := w.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil, toolErr("%s already exists; use files.replace or files.append to change it", display(p))
	}
	if err != nil {
		return nil, fsErr(p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = w.root.Remove(name)
		return nil, fsErr(p, err)
	}
	// A create without metadata also clears a record left by a file deleted behind
	// our back, so stat never shows another file's metadata.
	if err := w.storeMetadata(splitName(name), md); err != nil {
		return nil, err
	}
	return createOutput{Path: p, Version: version(data), Size: int64(len(data)), Created: true}, nil
}

type replaceOutput struct {
	Path            []string `json:"path"`
	Version         string   `json:"version"`
	PreviousVersion string   `json:"previousVersion"`
	Size            int64    `json:"size"`
}

func (w *Workspace) replace(inv invocation) (any, error) {
	p := inv.path
	if len(p) == 0 {
		return nil, toolErr("files.replace needs a path of at least one segment")
	}
	data, err := contentArg(inv.args)
	if err != nil {
		return nil, err
	}
	expected, hasExpected, err := stringArg(inv.args, "expectedVersion")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	name, err := w.resolve(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	prev, perm, err := w.currentVersion(p, name, "use files.create to make a new file")
	if err != nil {
		return nil, err
	}
	if err := checkVersion(expected, hasExpected, prev); err != nil {
		return nil, err
	}
	if err := w.writeAtomic(name, data, perm); err != nil {
		return nil, fsErr(p, err)
	}
	return replaceOutput{Path: p, Version: version(data), PreviousVersion: prev, Size: int64(len(data))}, nil
}

type appendOutput struct {
	Path    []string `json:"path"`
	Version string   `json:"version"`
	Size    int64    `json:"size"`
}

func (w *Workspace) append(inv invocation) (any, error) {
	p := inv.path
	if len(p) == 0 {
		return nil, toolErr("files.append needs a path of at least one segment")
	}
	data, err := contentArg(inv.args)
	if err != nil {
		return nil, err
	}
	expected, hasExpected, err := stringArg(inv.args, "expectedVersion")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	md, hasMD, err := objectArg(inv.args, "metadata")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	name, err := w.resolve(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	f, err := w.root.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, toolErr("%s does not exist; files.append only appends to an existing file (use files.create first)", display(p))
	case errors.Is(err, syscall.EISDIR):
		return nil, toolErr("%s is a directory; files.append appends to files", display(p))
	case err != nil:
		return nil, fsErr(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fsErr(p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, toolErr("%s is not a regular file", display(p))
	}
	// The old content is hashed through the same descriptor that appends, and the
	// new version continues that hash, so the answer describes the bytes we wrote to.
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, fsErr(p, err)
	}
	if err := checkVersion(expected, hasExpected, hexSum(h)); err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		return nil, fsErr(p, err)
	}
	h.Write(data)
	if hasMD {
		if err := w.storeMetadata(splitName(name), md); err != nil {
			return nil, err
		}
	}
	return appendOutput{Path: p, Version: hexSum(h), Size: n + int64(len(data))}, nil
}

type deleteOutput struct {
	Path    []string `json:"path"`
	Deleted bool     `json:"deleted"`
	Kind    string   `json:"kind"`
}

func (w *Workspace) delete(inv invocation) (any, error) {
	p := inv.path
	if len(p) == 0 {
		return nil, toolErr("files.delete refuses to delete the workspace root")
	}
	expected, hasExpected, err := stringArg(inv.args, "expectedVersion")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	recursive, err := boolArg(inv.args, "recursive", false)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	name, err := w.resolveParent(p)
	if err != nil {
		return nil, fsErr(p, err)
	}
	fi, err := w.root.Lstat(name)
	if err != nil {
		return nil, fsErr(p, err)
	}
	kind := kindOf(fi.Mode())
	switch kind {
	case kindSymlink:
		// Removing the link would not touch its target, but a link that leads out
		// of the workspace is refused like every other use of it.
		if _, err := w.resolve(p); isEscape(err) {
			return nil, fsErr(p, err)
		}
		if hasExpected {
			return nil, toolErr("%s is a symbolic link; expectedVersion applies to files", display(p))
		}
	case kindDirectory:
		if hasExpected {
			return nil, toolErr("%s is a directory; expectedVersion applies to files", display(p))
		}
		if !recursive {
			empty, err := w.isEmptyDir(name)
			if err != nil {
				return nil, fsErr(p, err)
			}
			if !empty {
				return nil, toolErr("%s is a directory that is not empty; pass recursive:true to delete it with everything in it", display(p))
			}
		}
	case kindFile:
		if hasExpected {
			cur, _, err := w.currentVersion(p, name, "nothing to delete")
			if err != nil {
				return nil, err
			}
			if err := checkVersion(expected, true, cur); err != nil {
				return nil, err
			}
		}
	default:
		if hasExpected {
			return nil, toolErr("%s is not a regular file; expectedVersion applies to files", display(p))
		}
	}
	if kind == kindDirectory && recursive {
		err = w.root.RemoveAll(name)
	} else {
		err = w.root.Remove(name)
	}
	if err != nil {
		return nil, fsErr(p, err)
	}
	switch kind {
	case kindDirectory:
		err = w.dropMetadataTree(splitName(name))
	case kindFile:
		err = w.storeMetadata(splitName(name), nil)
	}
	if err != nil {
		return nil, err
	}
	return deleteOutput{Path: p, Deleted: true, Kind: kind}, nil
}

func (w *Workspace) isEmptyDir(name string) (bool, error) {
	f, err := w.root.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// mkdirAll creates a directory and its parents for the file at p. MkdirAll reports
// a file in the way as "file exists", which would read as if p itself existed.
func (w *Workspace) mkdirAll(p []string, dir string) error {
	err := w.root.MkdirAll(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return toolErr("%s: a parent of this path is not a directory", display(p))
	}
	return fsErr(p, err)
}
