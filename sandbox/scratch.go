package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// scratch is the per-run directory holding the private HOME, TMPDIR and work directory.
type scratch struct {
	root, home, tmp, work string
}

// newScratch makes parent/name (parent defaults to $TMPDIR); should name be taken, a
// fresh sharedos-run-PID-* name.
func newScratch(parent, name string) (*scratch, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	root := filepath.Join(parent, name)
	err := os.Mkdir(root, 0o700)
	if errors.Is(err, fs.ErrExist) {
		root, err = os.MkdirTemp(parent, fmt.Sprintf("sharedos-run-%d-", os.Getpid()))
	}
	if err != nil {
		return nil, fmt.Errorf("create scratch directory: %w", err)
	}
	root, err = filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("resolve scratch directory: %w", err)
	}
	sc := &scratch{root: root, home: filepath.Join(root, "home"), tmp: filepath.Join(root, "tmp"), work: filepath.Join(root, "work")}
	for _, d := range []string{sc.home, sc.tmp, sc.work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, fmt.Errorf("create scratch directory: %w", err)
		}
	}
	return sc, nil
}

// remove deletes the scratch tree, first making read-only directories writable (the
// command may have left some).
func (sc *scratch) remove() error {
	if err := os.RemoveAll(sc.root); err == nil {
		return nil
	}
	_ = filepath.WalkDir(sc.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(sc.root); err != nil {
		return fmt.Errorf("remove scratch directory: %w", err)
	}
	return nil
}
