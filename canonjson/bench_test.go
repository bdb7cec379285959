package canonjson

import (
	"encoding/json"
	"testing"
)

func filesCatalogue(b *testing.B) json.RawMessage {
	v := loadVectors(b)
	for _, c := range v.Catalogues {
		if c.Name == "files (all twelve)" {
			return c.Tools
		}
	}
	b.Fatal(`no "files (all twelve)" catalogue in the wire vectors`)
	return nil
}

func BenchmarkCanonicalize(b *testing.B) {
	tools := filesCatalogue(b)
	b.SetBytes(int64(len(tools)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(tools); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshal measures the Go-value path on the same catalogue, decoded
// the way a caller holding generic JSON would have it.
func BenchmarkMarshal(b *testing.B) {
	var tools any
	if err := json.Unmarshal(filesCatalogue(b), &tools); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(tools); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewCollator is the cost the collator pool avoids per call.
func BenchmarkNewCollator(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = newCollator()
	}
}

func BenchmarkLess(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Less("additionalProperties", "annotations")
	}
}
