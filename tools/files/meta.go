package files

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Layout of the state directory.
const (
	metadataDir  = "metadata"
	snapshotsDir = "snapshots"
)

// metaRecord is one file's metadata as stored. It carries its path so that a
// recursive delete can find the records below a directory.
type metaRecord struct {
	Path     []string       `json:"path"`
	Metadata map[string]any `json:"metadata"`
}

// metaName keys metadata by the file's resolved location: a hash, because segments
// may be longer together than a file name may be.
func metaName(p []string) string {
	key, _ := json.Marshal(p)
	sum := sha256.Sum256(key)
	return metadataDir + "/" + hex.EncodeToString(sum[:]) + ".json"
}

// loadMetadata needs no lock: records are replaced by rename, never rewritten in place.
func (w *Workspace) loadMetadata(p []string) (map[string]any, error) {
	data, err := w.state.ReadFile(metaName(p))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading metadata of %s: %w", display(p), err)
	}
	var rec metaRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("metadata of %s is corrupt: %w", display(p), err)
	}
	return rec.Metadata, nil
}

// storeMetadata replaces (md != nil) or removes (md == nil) a record. The caller holds w.mu.
func (w *Workspace) storeMetadata(p []string, md map[string]any) error {
	name := metaName(p)
	if md == nil {
		if err := w.state.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing metadata of %s: %w", display(p), err)
		}
		return nil
	}
	data, err := json.Marshal(metaRecord{Path: p, Metadata: md})
	if err != nil {
		return toolErr("metadata cannot be encoded as JSON: %v", err)
	}
	if err := w.writeState(name, data); err != nil {
		return fmt.Errorf("storing metadata of %s: %w", display(p), err)
	}
	return nil
}

// dropMetadataTree removes the records of p and everything below it. The caller holds w.mu.
func (w *Workspace) dropMetadataTree(p []string) error {
	dir, err := w.state.Open(metadataDir)
	if err != nil {
		return fmt.Errorf("reading metadata: %w", err)
	}
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return fmt.Errorf("reading metadata: %w", err)
	}
	var errs []error
	for _, n := range names {
		if !strings.HasSuffix(n, ".json") {
			continue
		}
		data, err := w.state.ReadFile(metadataDir + "/" + n)
		if err != nil {
			continue
		}
		var rec metaRecord
		if json.Unmarshal(data, &rec) != nil {
			continue
		}
		if len(rec.Path) >= len(p) && slices.Equal(rec.Path[:len(p)], p) {
			if err := w.state.Remove(metadataDir + "/" + n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing metadata below %s: %w", display(p), err)
	}
	return nil
}

// writeState writes a state file atomically: a reader sees the old or the new
// record, never half of one.
func (w *Workspace) writeState(name string, data []byte) error {
	tmp := path.Join(path.Dir(name), ".tmp-"+randomHex(8))
	if err := w.state.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := w.state.Rename(tmp, name); err != nil {
		_ = w.state.Remove(tmp)
		return err
	}
	return nil
}
