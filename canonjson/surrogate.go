package canonjson

import (
	"unicode/utf8"

	"golang.org/x/text/collate"
)

// ICU collates a lone surrogate code unit like an unassigned code point: an
// implicit primary weight derived from its value, so it sorts after every
// assigned character (Han included) and before the private-use area and
// higher unassigned code points. x/text cannot see a surrogate at all (to it
// the WTF-8 bytes are invalid UTF-8, which sorts somewhere else entirely), so
// for comparison only each one is replaced by a plane-4 code point, which is
// unassigned both in x/text's Unicode 6.2 tables and in current Unicode and
// therefore also gets an implicit weight. That keeps surrogates in code unit
// order among themselves and after every assigned character. The only
// comparisons that still differ from ICU are against BMP private-use
// characters and code points still unassigned between U+E000 and U+3FFFF,
// which a JSON key in practice never contains.
const surrogateStandIn = 0x40000 - 0xd800

func compareWithSurrogates(c *collate.Collator, a, b string) int {
	return c.CompareString(replaceSurrogates(a), replaceSurrogates(b))
}

func replaceSurrogates(s string) string {
	var out []byte
	start := 0
	for i := 0; i < len(s); {
		u, ok := surrogateAt(s, i)
		if !ok {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		out = utf8.AppendRune(out, rune(u)+surrogateStandIn)
		i += 3
		start = i
	}
	if out == nil {
		return s
	}
	return string(append(out, s[start:]...))
}
