// Package canonjson writes JSON exactly as SharedOS's TypeScript canonicalisation does, so hashes match byte for byte.
//
// The reference implementation is, in effect,
//
//	canon(v) = v is an object ? "{" + Object.keys(v).sort((a, b) => a.localeCompare(b))
//	                                  .map(k => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}"
//	         : v is an array  ? "[" + v.map(canon).join(",") + "]"
//	         : JSON.stringify(v)
//
// applied to the result of JSON.parse, running on Node 20 with full ICU. Every
// rule in this package exists to reproduce one of those JavaScript
// behaviours: the key order of Object.keys, the stable sort, ICU collation,
// and the way JSON.stringify prints strings and numbers.
//
// Key collation uses golang.org/x/text/collate, whose tables are CLDR 23 /
// Unicode 6.2, where Node 20 ships ICU 78. The two agree on every key made of
// ASCII, Latin-1 and Latin Extended-A/B characters (checked pair by pair
// against Node), and on basic Greek, kana and Hangul in randomised
// comparisons. They disagree on some other text: Han ideographs (ICU now uses
// radical-stroke order), characters added after Unicode 6.2 (including newer
// emoji), Ѓ/Ќ, U+FFFD and private-use characters, combining marks added
// since, digits of other scripts (ICU ties "١" with "1"), and lone
// surrogates against private-use characters. A document whose keys are
// plain identifiers is not affected.
package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// Canonicalize parses one JSON value from data and returns its canonical form.
//
// data must be strict RFC 8259 JSON in UTF-8 (surrounding JSON whitespace is
// allowed). Numbers that overflow float64 are rejected rather than turned into
// Infinity or null, so a hash can never silently stand for a different value.
func Canonicalize(data []byte) ([]byte, error) {
	p := parser{data: data}
	v, err := p.parseDocument()
	if err != nil {
		return nil, err
	}
	e := encoder{buf: make([]byte, 0, len(data))}
	defer e.release()
	e.encode(&v)
	return e.buf, nil
}

// Marshal encodes v with encoding/json and canonicalizes the result (for Go values: structs, maps, json.RawMessage...).
//
// Whatever encoding/json does to v happens first: struct tags, omitempty,
// MarshalJSON methods, and replacing invalid UTF-8 in strings with U+FFFD.
// Keys the collator calls equal keep the order encoding/json wrote them in
// (struct fields in declaration order, map keys in byte order), which is the
// order JSON.parse would give that text.
func Marshal(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("canonjson: %w", err)
	}
	return Canonicalize(raw)
}

// Hash returns the lowercase hex SHA-256 of the canonical form of data.
func Hash(data []byte) (string, error) {
	c, err := Canonicalize(data)
	if err != nil {
		return "", err
	}
	return hashBytes(c), nil
}

// HashValue is Hash(Marshal(v)).
func HashValue(v any) (string, error) {
	c, err := Marshal(v)
	if err != nil {
		return "", err
	}
	return hashBytes(c), nil
}

// Less reports whether key a sorts before key b in canonical key order (ICU root collation, ties false).
//
// Distinct strings can tie (for example "a" and "a\u0000", because ICU treats
// most control characters as ignorable). To reproduce JavaScript's stable
// sort, sort with slices.SortStableFunc / sort.SliceStable and start from the
// order JavaScript would have had. A lone surrogate is passed as its WTF-8
// bytes (0xED 0xA0..0xBF 0x80..0xBF), the form Canonicalize uses internally.
func Less(a, b string) bool {
	c := getCollator()
	defer collators.Put(c)
	return compareKeys(c, a, b) < 0
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// collators exists because collate.New costs about 1.5-2µs and 5KB while a
// comparison costs about 40-70ns: Less is called O(n log n) times per sort,
// and a fresh collator per call would dominate it. (For Canonicalize a fresh
// collator would be about 2% of a 12-tool catalogue; it borrows from the same
// pool only to skip the 5KB allocation.) A collate.Collator is not safe for
// concurrent use, so it cannot simply be shared; the pool hands each caller
// its own for the duration of the call.
var collators = sync.Pool{New: func() any { return newCollator() }}

func getCollator() *collate.Collator { return collators.Get().(*collate.Collator) }

// newCollator builds the collator that stands in for ICU's root locale as used
// by localeCompare under en-US (English has no tailoring in CLDR, so
// language.Und and language.English give the same order). No options are
// passed because the x/text defaults already are ICU's defaults: tertiary
// strength, alternate=non-ignorable (punctuation counts, which is what puts
// "_meta" and "$schema" first), case-first off (lowercase before uppercase on
// a tertiary tie), no numeric ordering and no identical-level tie break.
// collate.Force would break ties in byte order, which JavaScript does not do.
// For reference, ICU's root order of ASCII is: whitespace, then
// _ - , ; ! ? . ' " ( @ * / \ & # % ` ^ + < = | ~ $, then digits, then
// letters.
func newCollator() *collate.Collator { return collate.New(language.Und) }

// compareKeys compares two keys the way ICU compares the UTF-16 strings they
// stand for.
func compareKeys(c *collate.Collator, a, b string) int {
	if hasSurrogate(a) || hasSurrogate(b) {
		return compareWithSurrogates(c, a, b)
	}
	return c.CompareString(a, b)
}

type encoder struct {
	buf  []byte
	coll *collate.Collator // borrowed at the first object with two keys; scalars and arrays never need one.
}

func (e *encoder) release() {
	if e.coll != nil {
		collators.Put(e.coll)
		e.coll = nil
	}
}

func (e *encoder) collator() *collate.Collator {
	if e.coll == nil {
		e.coll = getCollator()
	}
	return e.coll
}

func (e *encoder) encode(v *value) {
	switch v.kind {
	case kindNull:
		e.buf = append(e.buf, "null"...)
	case kindFalse:
		e.buf = append(e.buf, "false"...)
	case kindTrue:
		e.buf = append(e.buf, "true"...)
	case kindNumber:
		e.buf = appendNumber(e.buf, v.num)
	case kindString:
		e.buf = appendString(e.buf, v.str)
	case kindArray:
		e.buf = append(e.buf, '[')
		for i := range v.arr {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.encode(&v.arr[i])
		}
		e.buf = append(e.buf, ']')
	case kindObject:
		members := v.obj
		if len(members) > 1 {
			// The members already are in Object.keys order; a stable sort
			// keeps that order for keys the collator calls equal, exactly
			// as V8's (stable) Array.prototype.sort does.
			c := e.collator()
			slices.SortStableFunc(members, func(x, y member) int {
				return compareKeys(c, x.key, y.key)
			})
		}
		e.buf = append(e.buf, '{')
		for i := range members {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, members[i].key)
			e.buf = append(e.buf, ':')
			e.encode(&members[i].val)
		}
		e.buf = append(e.buf, '}')
	}
}
