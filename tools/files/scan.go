package files

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSkipList bounds how many skipped files a search or grep names; the count is
// always complete.
const maxSkipList = 100

// Reasons a scan passes a file by.
const (
	skipBinary     = "binary"
	skipTooLarge   = "too large"
	skipSymlink    = "symlink"
	skipNotRegular = "not a regular file"
	skipUnreadable = "unreadable"
)

type skipEntry struct {
	Path   []string `json:"path"`
	Reason string   `json:"reason"`
	Size   *int64   `json:"size,omitempty"`
}

// scanner walks a subtree for search and grep. The walk is in segment order (a
// directory's entries sorted by name, each directory's contents right after it),
// so results come out in the same order whatever order the files were made in.
// Symlinks are listed as skipped and never followed: that avoids cycles, and a link
// out of the workspace is never even opened.
type scanner struct {
	w            *Workspace
	base         []string
	skipped      []skipEntry
	skippedCount int
	filesScanned int
}

// errStop ends a walk early without it being an error.
var errStop = errors.New("stop walking")

func (s *scanner) skip(rel []string, reason string, size int64) {
	s.skippedCount++
	if len(s.skipped) >= maxSkipList {
		return
	}
	e := skipEntry{Path: s.full(rel), Reason: reason}
	if size >= 0 {
		e.Size = new(size)
	}
	s.skipped = append(s.skipped, e)
}

func (s *scanner) full(rel []string) []string {
	return append(slices.Clone(s.base), rel...)
}

// run walks the scanner's base path and calls fn with each text file's content.
func (s *scanner) run(ctx context.Context, fn func(rel []string, content string) error) error {
	name, err := s.w.resolve(s.base)
	if err != nil {
		return fsErr(s.base, err)
	}
	err = s.walk(ctx, name, []string{}, fn)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

func (s *scanner) walk(ctx context.Context, name string, rel []string, fn func([]string, string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, fi, err := s.w.openRead(name)
	if err != nil {
		if len(rel) == 0 {
			return fsErr(s.base, err)
		}
		s.skip(rel, skipUnreadable, -1)
		return nil
	}
	if !fi.IsDir() {
		f.Close()
		return s.scanFile(name, rel, fn)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		s.skip(rel, skipUnreadable, -1)
		return nil
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, d := range ents {
		childRel := append(slices.Clone(rel), d.Name())
		childName := d.Name()
		if name != "." {
			childName = name + "/" + d.Name()
		}
		var err error
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			s.skip(childRel, skipSymlink, -1)
		case t.IsDir():
			err = s.walk(ctx, childName, childRel, fn)
		case t.IsRegular():
			err = s.scanFile(childName, childRel, fn)
		default:
			s.skip(childRel, skipNotRegular, -1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) scanFile(name string, rel []string, fn func([]string, string) error) error {
	f, fi, err := s.w.openRead(name)
	if err != nil {
		s.skip(rel, skipUnreadable, -1)
		return nil
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		s.skip(rel, skipNotRegular, -1)
		return nil
	}
	limit := s.w.opts.MaxScanBytes
	if fi.Size() > limit {
		s.skip(rel, skipTooLarge, fi.Size())
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		s.skip(rel, skipUnreadable, -1)
		return nil
	}
	if int64(len(data)) > limit {
		s.skip(rel, skipTooLarge, int64(len(data)))
		return nil
	}
	if !isText(data) {
		s.skip(rel, skipBinary, int64(len(data)))
		return nil
	}
	s.filesScanned++
	return fn(rel, string(data))
}

// splitLines splits text into lines without their terminators; a final newline
// does not start another line.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// cutBytes shortens s to at most n bytes on a rune boundary, marking the cut.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// cutRunes shortens s to at most n runes.
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// tokens splits a query into lowercase words of letters and digits, each once.
func tokens(q string) []string {
	fields := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var out []string
	for _, f := range fields {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

type searchResult struct {
	Path    []string `json:"path"`
	Score   int      `json:"score"`
	Matches int      `json:"matches"`
	Snippet string   `json:"snippet"`
}

type searchOutput struct {
	Path         []string       `json:"path"`
	Query        string         `json:"query"`
	Results      []searchResult `json:"results"`
	Total        int            `json:"total"`
	Truncated    bool           `json:"truncated"`
	FilesScanned int            `json:"filesScanned"`
	Skipped      []skipEntry    `json:"skipped"`
	SkippedCount int            `json:"skippedCount"`
}

// Search weights. The ranking is lexical and fully deterministic: a word in the
// file's name says more than one in its body, and breadth (how many query words
// appear) counts before repetition (how many lines match, capped so that a long
// file cannot win on length alone).
const (
	scoreNameToken    = 3
	scoreContentToken = 2
	scoreLineCap      = 10
	scorePhrase       = 5
	snippetRunes      = 200
)

func (w *Workspace) search(inv invocation) (any, error) {
	query, _, err := stringArg(inv.args, "query")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	limit, err := intArg(inv.args, "limit", 20, 1, 100)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	toks := tokens(query)
	if len(toks) == 0 {
		return nil, toolErr("query %q has no words to search for (letters or digits)", query)
	}
	phrase := strings.Join(strings.Fields(strings.ToLower(query)), " ")
	s := &scanner{w: w, base: inv.path}
	var all []searchResult
	err = s.run(inv.ctx, func(rel []string, content string) error {
		full := s.full(rel)
		fileName := ""
		if len(full) > 0 {
			fileName = strings.ToLower(full[len(full)-1])
		}
		score := 0
		for _, t := range toks {
			if strings.Contains(fileName, t) {
				score += scoreNameToken
			}
		}
		found := make([]bool, len(toks))
		matches, snippet := 0, ""
		for _, line := range splitLines(content) {
			ll := strings.ToLower(line)
			hit := false
			for i, t := range toks {
				if strings.Contains(ll, t) {
					found[i], hit = true, true
				}
			}
			if hit {
				if matches == 0 {
					snippet = cutRunes(strings.TrimSpace(line), snippetRunes)
				}
				matches++
			}
		}
		for _, f := range found {
			if f {
				score += scoreContentToken
			}
		}
		score += min(matches, scoreLineCap)
		if len(toks) > 1 && (strings.Contains(strings.ToLower(content), phrase) || strings.Contains(fileName, phrase)) {
			score += scorePhrase
		}
		if score > 0 {
			all = append(all, searchResult{Path: full, Score: score, Matches: matches, Snippet: snippet})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b searchResult) int {
		if a.Score != b.Score {
			return b.Score - a.Score
		}
		return slices.Compare(a.Path, b.Path)
	})
	out := searchOutput{Path: inv.path, Query: query, Results: []searchResult{}, Total: len(all), FilesScanned: s.filesScanned, SkippedCount: s.skippedCount}
	b := budget{left: w.opts.MaxResultBytes}
	for _, r := range all[:min(len(all), limit)] {
		if !b.take(r) {
			out.Truncated = true
			break
		}
		out.Results = append(out.Results, r)
	}
	out.Skipped = s.skippedList(&b, &out.Truncated)
	return out, nil
}

// skippedList returns the skipped entries that still fit the result budget.
func (s *scanner) skippedList(b *budget, truncated *bool) []skipEntry {
	out := []skipEntry{}
	for _, e := range s.skipped {
		if !b.take(e) {
			*truncated = true
			break
		}
		out = append(out, e)
	}
	return out
}

type grepMatch struct {
	Path   []string `json:"path"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before"`
	After  []string `json:"after"`
}

type grepOutput struct {
	Path         []string    `json:"path"`
	Matches      []grepMatch `json:"matches"`
	Truncated    bool        `json:"truncated"`
	FilesScanned int         `json:"filesScanned"`
	Skipped      []skipEntry `json:"skipped"`
	SkippedCount int         `json:"skippedCount"`
}

// grepMatcher builds the line predicate. Case-insensitive literals go through the
// regexp engine with (?i) and a quoted pattern: that is Unicode simple case
// folding, the same equivalence strings.EqualFold uses.
func grepMatcher(pattern, mode string, caseSensitive bool) (func(string) bool, error) {
	if mode == "literal" && caseSensitive {
		return func(l string) bool { return strings.Contains(l, pattern) }, nil
	}
	expr := pattern
	if mode == "literal" {
		expr = regexp.QuoteMeta(pattern)
	}
	if !caseSensitive {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, toolErr("invalid regular expression %q: %v", pattern, err)
	}
	return re.MatchString, nil
}

func cutLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = cutBytes(l, MaxLineBytes)
	}
	return out
}

func (w *Workspace) grep(inv invocation) (any, error) {
	pattern, _, err := stringArg(inv.args, "pattern")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	if pattern == "" {
		return nil, toolErr("pattern is empty")
	}
	mode, hasMode, err := stringArg(inv.args, "mode")
	if err != nil {
		return nil, toolErr("%v", err)
	}
	if !hasMode {
		mode = "literal"
	}
	if mode != "literal" && mode != "regex" {
		return nil, toolErr("mode must be \"literal\" or \"regex\", got %q", mode)
	}
	caseSensitive, err := boolArg(inv.args, "caseSensitive", true)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	before, err := intArg(inv.args, "contextBefore", 0, 0, 100)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	after, err := intArg(inv.args, "contextAfter", 0, 0, 100)
	if err != nil {
		return nil, toolErr("%v", err)
	}
	match, err := grepMatcher(pattern, mode, caseSensitive)
	if err != nil {
		return nil, err
	}
	s := &scanner{w: w, base: inv.path}
	out := grepOutput{Path: inv.path, Matches: []grepMatch{}}
	b := budget{left: w.opts.MaxResultBytes}
	err = s.run(inv.ctx, func(rel []string, content string) error {
		lines := splitLines(content)
		var full []string
		for i, line := range lines {
			if !match(line) {
				continue
			}
			if len(out.Matches) >= MaxGrepMatches {
				out.Truncated = true
				return errStop
			}
			if full == nil {
				full = s.full(rel)
			}
			m := grepMatch{
				Path:   full,
				Line:   i + 1,
				Text:   cutBytes(line, MaxLineBytes),
				Before: cutLines(lines[max(0, i-before):i]),
				After:  cutLines(lines[i+1 : min(len(lines), i+1+after)]),
			}
			if !b.take(m) {
				out.Truncated = true
				return errStop
			}
			out.Matches = append(out.Matches, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.FilesScanned, out.SkippedCount = s.filesScanned, s.skippedCount
	out.Skipped = s.skippedList(&b, &out.Truncated)
	return out, nil
}
