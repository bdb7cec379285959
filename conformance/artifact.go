package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// ArtifactKind is the artifact's kind, as SharedOS names it.
const ArtifactKind = "mcp-toolshare-conformance"

// Artifact is mcp-conformance.json.
type Artifact struct {
	Kind          string          `json:"kind"`
	ElapsedMs     float64         `json:"elapsedMs"`
	SharedosRun   VersionInfo     `json:"sharedosRun"`
	CaseSetHash   string          `json:"caseSetHash"`
	ConfigHash    string          `json:"configHash"`
	CasesRun      []string        `json:"casesRun"`
	CasesDeclared []string        `json:"casesDeclared"`
	Availability  []Availability  `json:"availability"`
	Model         *ModelInfo      `json:"model"`
	Catalogues    []ColumnCatalog `json:"catalogues"`
	Rows          []Row           `json:"rows"`
	Sandbox       []ColumnSandbox `json:"sandbox"`
	Warnings      []string        `json:"warnings"`
	Shard         *ShardInfo      `json:"shard,omitempty"`
}

// VersionInfo names the sharedos-run that made the artifact.
type VersionInfo struct {
	Version string `json:"version"`
}

// ModelInfo is a model seat as recorded.
type ModelInfo struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
}

// Availability is one column's harness as probed.
type Availability struct {
	ColumnID     string     `json:"columnId"`
	Label        string     `json:"label"`
	Harness      string     `json:"harness"`
	Available    bool       `json:"available"`
	Reason       string     `json:"reason,omitempty"`
	Version      string     `json:"version,omitempty"`
	MCPSupport   string     `json:"mcpSupport"`
	MCPExtension string     `json:"mcpExtension,omitempty"`
	ToolPolicy   any        `json:"toolPolicy"`
	PolicyHash   string     `json:"policyHash"`
	Model        *ModelInfo `json:"model,omitempty"`
}

// ColumnCatalog is what one column was given and what it called.
type ColumnCatalog struct {
	ColumnID          string            `json:"columnId"`
	CatalogHashes     []string          `json:"catalogHashes"`
	CatalogHashByCase map[string]string `json:"catalogHashByCase"`
	Calls             []Call            `json:"calls"`
}

// Call is one recorded operation.
type Call struct {
	CaseID     string   `json:"caseId"`
	Tool       string   `json:"tool"`
	Path       []string `json:"path"`
	Outcome    string   `json:"outcome"`
	ReasonCode string   `json:"reasonCode,omitempty"`
}

// Row is one case across the columns.
type Row struct {
	CaseID    string `json:"caseId"`
	Invariant string `json:"invariant"`
	Cells     []Cell `json:"cells"`
}

// ColumnSandbox is how a column was confined.
type ColumnSandbox struct {
	ColumnID string `json:"columnId"`
	Mode     string `json:"mode"`
	Cgroup   string `json:"cgroup"`
	Network  string `json:"network"`
}

// ShardInfo says which slice of the cells an artifact holds.
type ShardInfo struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Warnings lists what makes columns incomparable: models that differ or are not
// declared, a case's catalogHash that differs between columns, a column that recorded
// no catalogue for a case it ran.
func Warnings(a *Artifact) []string {
	var w []string
	models := map[string][]string{}
	for _, av := range a.Availability {
		if !av.Available {
			continue
		}
		if av.Model == nil || av.Model.ID == "" {
			w = append(w, fmt.Sprintf("column %s declares no model: it cannot be compared", av.ColumnID))
			continue
		}
		key := av.Model.Provider + "/" + av.Model.ID
		models[key] = append(models[key], av.ColumnID)
	}
	if len(models) > 1 {
		var parts []string
		for m, cols := range models {
			parts = append(parts, fmt.Sprintf("%s (%v)", m, cols))
		}
		sort.Strings(parts)
		w = append(w, fmt.Sprintf("columns were given different models: %v; compare them only as models, not as harnesses", parts))
	}
	for _, row := range a.Rows {
		hashes := map[string][]string{}
		for _, cell := range row.Cells {
			cat := catalogOf(a, cell.ColumnID)
			if cat == nil || !columnAvailable(a, cell.ColumnID) {
				continue
			}
			h, ok := cat.CatalogHashByCase[row.CaseID]
			if !ok {
				w = append(w, fmt.Sprintf("column %s recorded no catalogue for case %s", cell.ColumnID, row.CaseID))
				continue
			}
			hashes[h] = append(hashes[h], cell.ColumnID)
		}
		if len(hashes) > 1 {
			var parts []string
			for h, cols := range hashes {
				parts = append(parts, fmt.Sprintf("%s %v", h, cols))
			}
			sort.Strings(parts)
			w = append(w, fmt.Sprintf("case %s: columns were given different catalogues: %v", row.CaseID, parts))
		}
	}
	return w
}

func catalogOf(a *Artifact, columnID string) *ColumnCatalog {
	for i := range a.Catalogues {
		if a.Catalogues[i].ColumnID == columnID {
			return &a.Catalogues[i]
		}
	}
	return nil
}

func columnAvailable(a *Artifact, columnID string) bool {
	return slices.ContainsFunc(a.Availability, func(av Availability) bool { return av.ColumnID == columnID && av.Available })
}

// Merge combines shard artifacts into one, the same as an unsharded run up to
// timings. Shards of different case sets, configurations or sharedos-run versions
// are refused, and so are overlapping or missing shards.
func Merge(shards []*Artifact) (*Artifact, error) {
	if len(shards) == 0 {
		return nil, errors.New("merge: no artifacts")
	}
	first := shards[0]
	seen := map[int]bool{}
	count := 0
	for i, s := range shards {
		switch {
		case s.Kind != ArtifactKind:
			return nil, fmt.Errorf("merge: artifact %d is not a %s artifact", i, ArtifactKind)
		case s.CaseSetHash != first.CaseSetHash:
			return nil, fmt.Errorf("merge: artifact %d ran another case set (%s, not %s)", i, s.CaseSetHash, first.CaseSetHash)
		case s.ConfigHash != first.ConfigHash:
			return nil, fmt.Errorf("merge: artifact %d ran with another configuration", i)
		case s.SharedosRun.Version != first.SharedosRun.Version:
			return nil, fmt.Errorf("merge: artifact %d was made by sharedos-run %s, not %s", i, s.SharedosRun.Version, first.SharedosRun.Version)
		case !slices.Equal(s.CasesRun, first.CasesRun):
			return nil, fmt.Errorf("merge: artifact %d ran other cases", i)
		}
		if s.Shard == nil {
			if len(shards) > 1 {
				return nil, fmt.Errorf("merge: artifact %d is not a shard", i)
			}
			continue
		}
		if count == 0 {
			count = s.Shard.Count
		}
		if s.Shard.Count != count || seen[s.Shard.Index] {
			return nil, fmt.Errorf("merge: shard %d/%d does not fit the others", s.Shard.Index, s.Shard.Count)
		}
		seen[s.Shard.Index] = true
	}
	if count > 0 && len(seen) != count {
		return nil, fmt.Errorf("merge: %d of %d shards given", len(seen), count)
	}
	out := &Artifact{
		Kind: ArtifactKind, SharedosRun: first.SharedosRun, CaseSetHash: first.CaseSetHash, ConfigHash: first.ConfigHash,
		CasesRun: first.CasesRun, CasesDeclared: first.CasesDeclared, Availability: first.Availability, Model: first.Model,
		Sandbox: first.Sandbox,
	}
	rows := map[string]*Row{}
	catalogs := map[string]*ColumnCatalog{}
	for _, s := range shards {
		out.ElapsedMs += s.ElapsedMs
		for _, r := range s.Rows {
			row := rows[r.CaseID]
			if row == nil {
				row = &Row{CaseID: r.CaseID, Invariant: r.Invariant}
				rows[r.CaseID] = row
			}
			row.Cells = append(row.Cells, r.Cells...)
		}
		for _, c := range s.Catalogues {
			cat := catalogs[c.ColumnID]
			if cat == nil {
				cat = &ColumnCatalog{ColumnID: c.ColumnID, CatalogHashByCase: map[string]string{}}
				catalogs[c.ColumnID] = cat
			}
			for k, v := range c.CatalogHashByCase {
				cat.CatalogHashByCase[k] = v
			}
			cat.Calls = append(cat.Calls, c.Calls...)
		}
	}
	columns := columnOrder(first)
	for _, id := range first.CasesRun {
		if row := rows[id]; row != nil {
			sortCells(row.Cells, columns)
			out.Rows = append(out.Rows, *row)
		}
	}
	for _, col := range columns {
		if cat := catalogs[col]; cat != nil {
			finishCatalog(cat, first.CasesRun)
			out.Catalogues = append(out.Catalogues, *cat)
		}
	}
	out.Warnings = append([]string{}, Warnings(out)...)
	return out, nil
}

func columnOrder(a *Artifact) []string {
	var cols []string
	for _, av := range a.Availability {
		cols = append(cols, av.ColumnID)
	}
	return cols
}

func sortCells(cells []Cell, columns []string) {
	sort.SliceStable(cells, func(i, j int) bool {
		return slices.Index(columns, cells[i].ColumnID) < slices.Index(columns, cells[j].ColumnID)
	})
}

// finishCatalog orders calls by case order (then as recorded) and derives the
// distinct hashes.
func finishCatalog(cat *ColumnCatalog, caseOrder []string) {
	sort.SliceStable(cat.Calls, func(i, j int) bool {
		return slices.Index(caseOrder, cat.Calls[i].CaseID) < slices.Index(caseOrder, cat.Calls[j].CaseID)
	})
	cat.CatalogHashes = []string{}
	for _, id := range caseOrder {
		if h, ok := cat.CatalogHashByCase[id]; ok && !slices.Contains(cat.CatalogHashes, h) {
			cat.CatalogHashes = append(cat.CatalogHashes, h)
		}
	}
	if cat.Calls == nil {
		cat.Calls = []Call{}
	}
}
