package files

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Entry kinds as published.
const (
	kindFile      = "file"
	kindDirectory = "directory"
	kindSymlink   = "symlink"
	kindOther     = "other"
)

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return kindSymlink
	case m.IsDir():
		return kindDirectory
	case m.IsRegular():
		return kindFile
	}
	return kindOther
}

// sniffBytes is how much of a file decides whether it is binary, as git does.
const sniffBytes = 8 << 10

// isText reports whether data can be returned as UTF-8 text: no NUL in its first
// 8 KiB and valid UTF-8 throughout.
func isText(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) < 0 && utf8.Valid(data)
}

// budget bounds the JSON size of a result list.
type budget struct{ left int }

// take charges v's encoded size (plus a separator) and reports whether it fit.
func (b *budget) take(v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		return false
	}
	n := len(data) + 1
	if n > b.left {
		b.left = 0
		return false
	}
	b.left -= n
	return true
}

// openRead opens a resolved name for reading through the root.
func (w *Workspace) openRead(name string) (*os.File, fs.FileInfo, error) {
	f, err := w.root.OpenFile(name, readFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

type listEntry struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Size *int64 `json:"size,omitempty"`
}

type listOutput struct {
	Path      []string    `json:"path"`
	Entries   []listEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

func (w *Workspace) list(inv invocation) (any, error) {
	name, err := w.resolve(inv.path)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	f, fi, err := w.openRead(name)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	defer f.Close()
	if !fi.IsDir() {
		return nil, toolErr("%s is not a directory; use files.stat or files.read", display(inv.path))
	}
	dirents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	slices.SortFunc(dirents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := listOutput{Path: inv.path, Entries: []listEntry{}}
	b := budget{left: w.opts.MaxResultBytes}
	for _, d := range dirents {
		e := listEntry{Name: d.Name(), Kind: kindOf(d.Type())}
		if e.Kind == kindFile {
			if info, err := d.Info(); err == nil {
				e.Size = new(info.Size())
			}
		}
		if !b.take(e) {
			out.Truncated = true
			break
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

type statOutput struct {
	Path       []string       `json:"path"`
	Kind       string         `json:"kind"`
	Size       *int64         `json:"size,omitempty"`
	ModifiedAt string         `json:"modifiedAt"`
	Version    string         `json:"version,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (w *Workspace) stat(inv invocation) (any, error) {
	name, err := w.resolve(inv.path)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	f, fi, err := w.openRead(name)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	defer f.Close()
	out := statOutput{Path: inv.path, Kind: kindOf(fi.Mode()), ModifiedAt: formatTime(fi.ModTime())}
	if out.Kind == kindFile {
		// Size and version come from the same bytes, so they agree even if the file
		// is being appended to.
		v, n, err := hashReader(f)
		if err != nil {
			return nil, fsErr(inv.path, err)
		}
		out.Version, out.Size = v, &n
	}
	md, err := w.loadMetadata(splitName(name))
	if err != nil {
		return nil, err
	}
	out.Metadata = md
	return out, nil
}

type readOutput struct {
	Path     []string `json:"path"`
	Content  string   `json:"content"`
	Encoding string   `json:"encoding"`
	Size     int64    `json:"size"`
	Version  string   `json:"version"`
}

func (w *Workspace) read(inv invocation) (any, error) {
	name, err := w.resolve(inv.path)
	if err != nil {
		return nil, fsErr(inv.path, err)
	}
	data, err := w.readFile(inv.path, name, w.opts.MaxReadBytes)
	if err != nil {
		return nil, err
	}
	out := readOutput{Path: inv.path, Size: int64(len(data)), Version: version(data)}
	if isText(data) {
		out.Content, out.Encoding = string(data), "utf-8"
	} else {
		out.Content, out.Encoding = base64.StdEncoding.EncodeToString(data), "base64"
	}
	return out, nil
}

// readFile reads a whole regular file of at most limit bytes through one descriptor.
func (w *Workspace) readFile(p []string, name string, limit int64) ([]byte, error) {
	f, fi, err := w.openRead(name)
	if err != nil {
		return nil, fsErr(p, err)
	}
	defer f.Close()
	if fi.IsDir() {
		return nil, toolErr("%s is a directory; use files.list", display(p))
	}
	if !fi.Mode().IsRegular() {
		return nil, toolErr("%s is not a regular file", display(p))
	}
	tooBig := func(size int64) error {
		return toolErr("%s is %d bytes; files.read returns at most %d bytes. Use files.grep (with context lines) or files.search to find the part you need", display(p), size, limit)
	}
	if fi.Size() > limit {
		return nil, tooBig(fi.Size())
	}
	// The file may grow after Stat; reading one byte past the cap notices.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fsErr(p, err)
	}
	if int64(len(data)) > limit {
		return nil, tooBig(int64(len(data)))
	}
	return data, nil
}
