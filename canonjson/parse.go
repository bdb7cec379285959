package canonjson

// This file is a small strict JSON parser. encoding/json is deliberately not
// used on the input side, because it cannot reproduce what JSON.parse hands
// to the canonicaliser:
//   - its decoder replaces a lone surrogate escape such as "\ud800" with
//     U+FFFD, while JSON.parse keeps it and JSON.stringify writes it back as
//     "\ud800", so the hash would change;
//   - it silently replaces invalid UTF-8 instead of rejecting it;
//   - decoding into map[string]any loses member order, and with it the
//     Object.keys order that decides between keys the collator calls equal
//     (and the position a duplicate key keeps).
// Marshal still uses encoding/json to turn Go values into JSON text; that text
// then goes through this parser like any other input.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting so that hostile input produces an error instead of
// deep recursion. SharedOS documents are a handful of levels deep.
const maxDepth = 512

type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// value is a parsed JSON value. Strings hold UTF-8, except that a lone
// surrogate (only reachable through a \uXXXX escape) is kept as its 3-byte
// WTF-8 form (0xED 0xA0..0xBF 0x80..0xBF) so that it survives to the output.
type value struct {
	kind kind
	num  float64
	str  string
	arr  []value
	obj  []member // in Object.keys order, duplicates already merged
}

type member struct {
	key string
	val value
}

type syntaxError struct {
	msg    string
	offset int
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("canonjson: %s at byte offset %d", e.msg, e.offset)
}

type parser struct {
	data  []byte
	pos   int
	depth int
}

func (p *parser) errorf(offset int, format string, args ...any) error {
	return &syntaxError{msg: fmt.Sprintf(format, args...), offset: offset}
}

// describe names the byte at offset for error messages.
func (p *parser) describe(offset int) string {
	if offset >= len(p.data) {
		return "unexpected end of input"
	}
	c := p.data[offset]
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("unexpected character %q", c)
	}
	return fmt.Sprintf("unexpected byte 0x%02x", c)
}

func (p *parser) parseDocument() (value, error) {
	p.skipSpace()
	v, err := p.parseValue()
	if err != nil {
		return value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return value{}, p.errorf(p.pos, "%s after top-level value", p.describe(p.pos))
	}
	return v, nil
}

// skipSpace skips the four RFC 8259 whitespace bytes and nothing else
// (JSON.parse does the same: no BOM, no U+00A0, no comments).
func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) parseValue() (value, error) {
	if p.pos >= len(p.data) {
		return value{}, p.errorf(p.pos, "unexpected end of input, expecting a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.parseObject()
	case c == '[':
		return p.parseArray()
	case c == '"':
		s, err := p.parseString()
		return value{kind: kindString, str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.parseNumber()
	case c == 't':
		return value{kind: kindTrue}, p.literal("true")
	case c == 'f':
		return value{kind: kindFalse}, p.literal("false")
	case c == 'n':
		return value{kind: kindNull}, p.literal("null")
	default:
		return value{}, p.errorf(p.pos, "%s, expecting a value", p.describe(p.pos))
	}
}

func (p *parser) literal(word string) error {
	start := p.pos
	for i := 0; i < len(word); i++ {
		if p.pos >= len(p.data) || p.data[p.pos] != word[i] {
			return p.errorf(p.pos, "%s in literal %s starting at byte offset %d", p.describe(p.pos), word, start)
		}
		p.pos++
	}
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.pos, "nesting deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) parseArray() (value, error) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '['
	v := value{kind: kindArray, arr: []value{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return v, nil
	}
	for {
		p.skipSpace()
		elem, err := p.parseValue()
		if err != nil {
			return value{}, err
		}
		v.arr = append(v.arr, elem)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return value{}, p.errorf(p.pos, "unexpected end of input in array, expecting ',' or ']'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return v, nil
		default:
			return value{}, p.errorf(p.pos, "%s in array, expecting ',' or ']'", p.describe(p.pos))
		}
	}
}

func (p *parser) parseObject() (value, error) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '{'
	v := value{kind: kindObject, obj: []member{}}
	// index finds an earlier occurrence of a duplicate key; it is only built
	// once an object is large enough for a linear scan to hurt.
	var index map[string]int
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return v, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return value{}, p.errorf(p.pos, "%s in object, expecting a string key", p.describe(p.pos))
		}
		key, err := p.parseString()
		if err != nil {
			return value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return value{}, p.errorf(p.pos, "%s after object key, expecting ':'", p.describe(p.pos))
		}
		p.pos++
		p.skipSpace()
		val, err := p.parseValue()
		if err != nil {
			return value{}, err
		}

		// JSON.parse assigns members one by one: a repeated key keeps the
		// position of its first occurrence and takes the last value.
		dup := -1
		if index != nil {
			if i, ok := index[key]; ok {
				dup = i
			}
		} else {
			for i := range v.obj {
				if v.obj[i].key == key {
					dup = i
					break
				}
			}
		}
		if dup >= 0 {
			v.obj[dup].val = val
		} else {
			v.obj = append(v.obj, member{key: key, val: val})
			if index != nil {
				index[key] = len(v.obj) - 1
			} else if len(v.obj) > 16 {
				index = make(map[string]int, 2*len(v.obj))
				for i := range v.obj {
					index[v.obj[i].key] = i
				}
			}
		}

		p.skipSpace()
		if p.pos >= len(p.data) {
			return value{}, p.errorf(p.pos, "unexpected end of input in object, expecting ',' or '}'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			orderLikeObjectKeys(v.obj)
			return v, nil
		default:
			return value{}, p.errorf(p.pos, "%s in object, expecting ',' or '}'", p.describe(p.pos))
		}
	}
}

// orderLikeObjectKeys rearranges members (in first-insertion order) into the
// order Object.keys reports them: array-index keys first, in ascending
// numeric order, then the other keys in insertion order. The later sort is
// stable, so this order decides between keys the collator considers equal.
func orderLikeObjectKeys(members []member) {
	n := 0
	for i := range members {
		if _, ok := arrayIndex(members[i].key); ok {
			n++
		}
	}
	if n == 0 {
		return
	}
	reordered := make([]member, 0, len(members))
	for i := range members {
		if _, ok := arrayIndex(members[i].key); ok {
			reordered = append(reordered, members[i])
		}
	}
	slices.SortFunc(reordered, func(a, b member) int {
		x, _ := arrayIndex(a.key)
		y, _ := arrayIndex(b.key)
		return cmp.Compare(x, y)
	})
	for i := range members {
		if _, ok := arrayIndex(members[i].key); !ok {
			reordered = append(reordered, members[i])
		}
	}
	copy(members, reordered)
}

// arrayIndex reports whether key is an ECMAScript array index: the canonical
// decimal form of an integer in [0, 2^32-2]. "01", "-0", "1e3" and
// "4294967295" are ordinary keys.
func arrayIndex(key string) (uint32, bool) {
	if len(key) == 0 || len(key) > 10 || (len(key) > 1 && key[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n >= math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
}

// parseNumber accepts exactly the RFC 8259 number grammar and rounds the
// text to the nearest float64, as JSON.parse does.
func (p *parser) parseNumber() (value, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
		return value{}, p.errorf(p.pos, "%s in number, expecting a digit", p.describe(p.pos))
	}
	if p.data[p.pos] == '0' {
		p.pos++
		if p.pos < len(p.data) && isDigit(p.data[p.pos]) {
			return value{}, p.errorf(p.pos, "leading zero in number starting at byte offset %d", start)
		}
	} else {
		p.skipDigits()
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
			return value{}, p.errorf(p.pos, "%s after decimal point, expecting a digit", p.describe(p.pos))
		}
		p.skipDigits()
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
			return value{}, p.errorf(p.pos, "%s in exponent, expecting a digit", p.describe(p.pos))
		}
		p.skipDigits()
	}
	text := p.data[start:p.pos]
	f, err := strconv.ParseFloat(string(text), 64)
	if math.IsInf(f, 0) {
		// JSON.parse would yield Infinity, which JSON.stringify writes as
		// null: two different inputs, one hash. Refuse instead.
		return value{}, p.errorf(start, "number %s overflows float64", abbreviate(text))
	}
	if err != nil {
		// Unreachable: the grammar above only lets through what
		// ParseFloat accepts, and ParseFloat reports underflow as 0 or a
		// subnormal without an error.
		return value{}, p.errorf(start, "number %s: %v", abbreviate(text), err)
	}
	return value{kind: kindNumber, num: f}, nil
}

func abbreviate(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) skipDigits() {
	for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
		p.pos++
	}
}

// parseString decodes a JSON string starting at the opening quote.
func (p *parser) parseString() (string, error) {
	start := p.pos
	p.pos++ // '"'
	// Fast path: no escapes, all ASCII or valid UTF-8, so the result is a
	// plain copy of the input bytes.
	i := p.pos
	for i < len(p.data) {
		c := p.data[i]
		if c == '"' {
			s := string(p.data[p.pos:i])
			p.pos = i + 1
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(p.data[i:])
		if r == utf8.RuneError && size == 1 {
			return "", p.errorf(i, "invalid UTF-8 in string")
		}
		i += size
	}
	buf := make([]byte, 0, i-p.pos+16)
	buf = append(buf, p.data[p.pos:i]...)
	p.pos = i
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf(p.pos, "unexpected end of input in string starting at byte offset %d", start)
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf(p.pos, "unescaped control character 0x%02x in string", c)
		case c == '\\':
			var err error
			if buf, err = p.parseEscape(buf); err != nil {
				return "", err
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", p.errorf(p.pos, "invalid UTF-8 in string")
			}
			buf = append(buf, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

// parseEscape decodes the escape at p.pos (a backslash) and appends it to buf.
func (p *parser) parseEscape(buf []byte) ([]byte, error) {
	at := p.pos
	if p.pos+1 >= len(p.data) {
		return nil, p.errorf(p.pos+1, "unexpected end of input in escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
	default:
		return nil, p.errorf(at, "invalid escape \\%s", printable(c))
	}
	u, err := p.hex4(at)
	if err != nil {
		return nil, err
	}
	if utf16.IsSurrogate(rune(u)) && u < 0xdc00 {
		// A high surrogate followed by an escaped low surrogate is one
		// code point; anything else leaves it lone (WTF-8 below).
		if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			save := p.pos
			p.pos += 2
			lo, err := p.hex4(save)
			if err != nil {
				return nil, err
			}
			if lo >= 0xdc00 && lo <= 0xdfff {
				return utf8.AppendRune(buf, utf16.DecodeRune(rune(u), rune(lo))), nil
			}
			p.pos = save // not a pair: decode the second escape on its own
		}
	}
	if utf16.IsSurrogate(rune(u)) {
		return appendWTF8Surrogate(buf, u), nil
	}
	return utf8.AppendRune(buf, rune(u)), nil
}

func printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(rune(c))
	}
	return fmt.Sprintf("<0x%02x>", c)
}

// hex4 reads the four hex digits of a \u escape that began at offset at.
func (p *parser) hex4(at int) (uint16, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf(at, "truncated \\u escape")
	}
	var u uint16
	for i := 0; i < 4; i++ {
		c := p.data[p.pos+i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorf(p.pos+i, "invalid hex digit %s in \\u escape", printable(c))
		}
		u = u<<4 | uint16(d)
	}
	p.pos += 4
	return u, nil
}

// appendWTF8Surrogate appends the generalized UTF-8 encoding of a surrogate
// code unit; utf8.AppendRune would substitute U+FFFD.
func appendWTF8Surrogate(buf []byte, u uint16) []byte {
	return append(buf, 0xe0|byte(u>>12), 0x80|byte(u>>6)&0x3f, 0x80|byte(u)&0x3f)
}

// surrogateAt reports the surrogate code unit encoded (as WTF-8) at s[i:].
func surrogateAt(s string, i int) (uint16, bool) {
	if i+2 < len(s) && s[i] == 0xed && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2] >= 0x80 && s[i+2] <= 0xbf {
		return 0xd000 | uint16(s[i+1]&0x3f)<<6 | uint16(s[i+2]&0x3f), true
	}
	return 0, false
}

func hasSurrogate(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if _, ok := surrogateAt(s, i); ok {
			return true
		}
	}
	return false
}
