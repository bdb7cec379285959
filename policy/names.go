// Package policy owns authority as SharedOS defines it: names and identifiers, the
// AccessContext, capability grants and the decision they support, namespace
// enablement, and the ToolPolicy that declares a harness's tool surface. It decides;
// it never executes a tool and does no I/O beyond loading and storing its own files.
package policy

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Limits from the SharedOS wire contract. Lengths count UTF-16 code units, as
// JavaScript does, so that a name accepted here is accepted there.
const (
	MaxToolNameLength   = 128
	MaxIdentifierLength = 256
	MaxActorLength      = 512
	MaxSegmentLength    = 256
	MaxPathSegments     = 64
)

// UTF16Len counts s in UTF-16 code units. Bytes that are not valid UTF-8 count as
// one unit each, as they would once replaced by U+FFFD.
func UTF16Len(s string) int {
	n := 0
	for len(s) > 0 {
		// A lone surrogate carried as WTF-8 (ED A0..BF xx) is one code unit in JavaScript.
		if len(s) >= 3 && s[0] == 0xed && s[1] >= 0xa0 && s[1] <= 0xbf {
			n++
			s = s[3:]
			continue
		}
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if r == utf8.RuneError && size <= 1 {
			n++
			continue
		}
		n += utf16.RuneLen(r)
	}
	return n
}

// ValidateToolName checks the registration rule: 1–128 characters of [A-Za-z0-9_.-].
func ValidateToolName(name string) error {
	if name == "" {
		return fmt.Errorf("tool name is empty")
	}
	if len(name) > MaxToolNameLength {
		return fmt.Errorf("tool name %q is longer than %d characters", name, MaxToolNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return fmt.Errorf("tool name %q has character %q outside [A-Za-z0-9_.-]", name, rune(c))
		}
	}
	return nil
}

// NormalizeIdentifier trims an identifier (ids, namespaces, sources, traceId) and
// checks that 1–256 UTF-16 code units remain.
func NormalizeIdentifier(field, value string) (string, error) {
	return normalizeBounded(field, value, MaxIdentifierLength)
}

func normalizeBounded(field, value string, max int) (string, error) {
	v := strings.TrimSpace(value)
	if v == "" {
		return "", fmt.Errorf("%s is empty", field)
	}
	if n := UTF16Len(v); n > max {
		return "", fmt.Errorf("%s is %d characters long; at most %d are allowed", field, n, max)
	}
	return v, nil
}

// PortableName is the tool name with every '.' replaced by '_', the form that
// clients which refuse dots in names send back.
func PortableName(name string) string {
	return strings.ReplaceAll(name, ".", "_")
}

// ValidateSegment checks one path segment: 1–256 characters, not "." or "..", and
// free of '/', '\\', NUL and other control characters.
func ValidateSegment(seg string) error {
	if seg == "" {
		return fmt.Errorf("path segment is empty")
	}
	if seg == "." || seg == ".." {
		return fmt.Errorf("path segment %q is not allowed", seg)
	}
	if n := UTF16Len(seg); n > MaxSegmentLength {
		return fmt.Errorf("path segment is %d characters long; at most %d are allowed", n, MaxSegmentLength)
	}
	if !utf8.ValidString(seg) {
		return fmt.Errorf("path segment %q is not valid UTF-8", seg)
	}
	for _, r := range seg {
		switch {
		case r == '/' || r == '\\':
			return fmt.Errorf("path segment %q contains a separator", seg)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return fmt.Errorf("path segment %q contains a control character", seg)
		}
	}
	return nil
}

// ValidatePath checks a path given as segments (at most 64, each valid).
func ValidatePath(path []string) error {
	if len(path) > MaxPathSegments {
		return fmt.Errorf("path has %d segments; at most %d are allowed", len(path), MaxPathSegments)
	}
	for i, seg := range path {
		if err := ValidateSegment(seg); err != nil {
			return fmt.Errorf("path segment %d: %w", i, err)
		}
	}
	return nil
}
