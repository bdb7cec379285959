package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzCanonicalize(f *testing.F) {
	v := loadVectors(f)
	for _, c := range v.Canonical {
		f.Add([]byte(c.InputJSON))
	}
	for _, c := range v.Catalogues {
		f.Add([]byte(c.Tools))
	}
	for _, c := range v.Policies {
		f.Add([]byte(c.Policy))
	}
	for _, c := range v.Prompts {
		f.Add([]byte(c.Value))
	}
	for _, c := range canonicalizeCases {
		f.Add([]byte(c.in))
	}
	for _, c := range rejectCases {
		if len(c.in) < 4096 {
			f.Add([]byte(c.in))
		}
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Canonicalize(data)
		if err != nil {
			var se *syntaxError
			if !errors.As(err, &se) || se.offset < 0 || se.offset > len(data) {
				t.Fatalf("error without a valid offset: %v", err)
			}
			return
		}
		if !utf8.Valid(out) || !json.Valid(out) {
			t.Fatalf("output is not valid JSON/UTF-8: %q", out)
		}

		// The output means the same as the input.
		p := parser{data: data}
		in, err := p.parseDocument()
		if err != nil {
			t.Fatalf("second parse of accepted input failed: %v", err)
		}
		q := parser{data: out}
		re, err := q.parseDocument()
		if err != nil {
			t.Fatalf("output does not re-parse: %v\n%q", err, out)
		}
		if !sameValue(&in, &re) {
			t.Fatalf("output means something else\n in %q\nout %q", data, out)
		}

		// Canonical output is a fixed point.
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent (%v)\n  once %q\n twice %q", err, out, again)
		}

		// Cross-check with encoding/json wherever it can represent the
		// input faithfully (it turns lone surrogates into U+FFFD).
		if json.Valid(data) && !hasLoneSurrogate(&in) {
			var a, b any
			if err := json.Unmarshal(data, &a); err != nil {
				t.Fatalf("encoding/json rejects accepted input: %v", err)
			}
			if err := json.Unmarshal(out, &b); err != nil {
				t.Fatalf("encoding/json rejects output: %v", err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("encoding/json sees different values\n in %q\nout %q", data, out)
			}
		}
	})
}

// sameValue compares two parsed values as JavaScript values: objects as
// key/value sets, numbers by value (so -0 equals 0, as it prints).
func sameValue(a, b *value) bool {
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case kindNumber:
		return a.num == b.num
	case kindString:
		return a.str == b.str
	case kindArray:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !sameValue(&a.arr[i], &b.arr[i]) {
				return false
			}
		}
	case kindObject:
		if len(a.obj) != len(b.obj) {
			return false
		}
		for i := range a.obj {
			j := 0
			for j < len(b.obj) && b.obj[j].key != a.obj[i].key {
				j++
			}
			if j == len(b.obj) || !sameValue(&a.obj[i].val, &b.obj[j].val) {
				return false
			}
		}
	}
	return true
}

func hasLoneSurrogate(v *value) bool {
	switch v.kind {
	case kindString:
		return hasSurrogate(v.str)
	case kindArray:
		for i := range v.arr {
			if hasLoneSurrogate(&v.arr[i]) {
				return true
			}
		}
	case kindObject:
		for i := range v.obj {
			if hasSurrogate(v.obj[i].key) || hasLoneSurrogate(&v.obj[i].val) {
				return true
			}
		}
	}
	return false
}

// FuzzNumberFormat checks appendNumber against an independent derivation of
// Number.prototype.toString from strconv's 'f' and 'e' formats, and that the
// text reads back as the same float64.
func FuzzNumberFormat(f *testing.F) {
	for _, x := range []float64{0, 1, -1, 0.1, 1e21, 1e-7, 1e-6, 5e-324, math.MaxFloat64, 123456789012345680000, 1.5e-7, 1.2345e25, 9.999999999999999e20, 9.999999999999999e-7} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		got := string(appendNumber(nil, x))
		var want string
		switch abs := math.Abs(x); {
		case x == 0:
			want = "0"
		case abs >= 1e21 || abs < 1e-6:
			// Go writes at least two exponent digits ("1e-07").
			want = strconv.FormatFloat(x, 'e', -1, 64)
			mant, exp, _ := strings.Cut(want, "e")
			sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
			want = mant + "e" + sign + digits
		default:
			want = strconv.FormatFloat(x, 'f', -1, 64)
		}
		if got != want {
			t.Fatalf("appendNumber(%v) = %s, want %s", x, got, want)
		}
		back, err := strconv.ParseFloat(got, 64)
		if err != nil || (back != x && !(x == 0 && back == 0)) {
			t.Fatalf("%s reads back as %v (%v), want %v", got, back, err, x)
		}
	})
}

// FuzzLess feeds Less arbitrary bytes (callers may pass any Go string): it
// must not panic and must behave like a strict order on what it is given.
func FuzzLess(f *testing.F) {
	f.Add("a", "B")
	f.Add("a\x00", "a")
	f.Add("\xed\xa0\x80", "\ue000")
	f.Add("\xff", "\xed\xa0")
	f.Add("x_1", "x-1")
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := Less(a, b), Less(b, a)
		if ab && ba {
			t.Fatalf("Less(%q, %q) and Less(%q, %q) both true", a, b, b, a)
		}
		if Less(a, a) {
			t.Fatalf("Less(%q, %q) is true", a, a)
		}
	})
}
