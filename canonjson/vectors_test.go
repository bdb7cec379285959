package canonjson

import (
	"encoding/json"
	"os"
	"testing"
)

// wireVectors mirrors the parts of testdata/wire-vectors.json (computed by
// the TypeScript implementation) that concern canonical JSON. Inputs are kept
// as json.RawMessage so the member order of the file, which is what
// JavaScript saw, reaches the canonicaliser unchanged.
type wireVectors struct {
	Canonical []struct {
		Name      string `json:"name"`
		InputJSON string `json:"inputJSON"`
		Canonical string `json:"canonical"`
		SHA256    string `json:"sha256"`
	} `json:"canonical"`
	Catalogues []struct {
		Name        string          `json:"name"`
		Tools       json.RawMessage `json:"tools"`
		Canonical   *string         `json:"canonical"`
		CatalogHash string          `json:"catalogHash"`
	} `json:"catalogues"`
	Policies []struct {
		Name       string          `json:"name"`
		Policy     json.RawMessage `json:"policy"`
		Canonical  *string         `json:"canonical"`
		PolicyHash string          `json:"policyHash"`
	} `json:"policies"`
	Prompts []struct {
		Name       string          `json:"name"`
		Value      json.RawMessage `json:"value"`
		PromptHash string          `json:"promptHash"`
	} `json:"prompts"`
}

func loadVectors(tb testing.TB) *wireVectors {
	tb.Helper()
	data, err := os.ReadFile("../testdata/wire-vectors.json")
	if err != nil {
		tb.Fatalf("reading wire vectors: %v", err)
	}
	var v wireVectors
	if err := json.Unmarshal(data, &v); err != nil {
		tb.Fatalf("decoding wire vectors: %v", err)
	}
	if len(v.Canonical) == 0 || len(v.Catalogues) == 0 || len(v.Policies) == 0 || len(v.Prompts) == 0 {
		tb.Fatalf("wire vectors file is missing sections")
	}
	return &v
}

// checkVector canonicalizes input directly and, after a round trip through
// map[string]any, via HashValue, so Marshal is held to the vectors too.
func checkVector(t *testing.T, input []byte, wantCanon *string, wantHash string) {
	t.Helper()
	got, err := Canonicalize(input)
	if err != nil {
		t.Fatalf("Canonicalize: %v", err)
	}
	if wantCanon != nil && string(got) != *wantCanon {
		t.Errorf("canonical form\n got %s\nwant %s", got, *wantCanon)
	}
	h, err := Hash(input)
	if err != nil {
		t.Fatalf("Hash: %v", err)
	}
	if h != wantHash {
		t.Errorf("Hash = %s, want %s", h, wantHash)
	}
	var decoded any
	if err := json.Unmarshal(input, &decoded); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	hv, err := HashValue(decoded)
	if err != nil {
		t.Fatalf("HashValue: %v", err)
	}
	if hv != wantHash {
		t.Errorf("HashValue = %s, want %s", hv, wantHash)
	}
	if h2, err := HashValue(json.RawMessage(input)); err != nil || h2 != wantHash {
		t.Errorf("HashValue(RawMessage) = %s, %v; want %s", h2, err, wantHash)
	}
}

func TestWireVectors(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Canonical {
		t.Run("canonical/"+c.Name, func(t *testing.T) {
			checkVector(t, []byte(c.InputJSON), &c.Canonical, c.SHA256)
		})
	}
	for _, c := range v.Catalogues {
		t.Run("catalogue/"+c.Name, func(t *testing.T) {
			checkVector(t, c.Tools, c.Canonical, c.CatalogHash)
		})
	}
	for _, c := range v.Policies {
		t.Run("policy/"+c.Name, func(t *testing.T) {
			checkVector(t, c.Policy, c.Canonical, c.PolicyHash)
		})
	}
	for _, c := range v.Prompts {
		t.Run("prompt/"+c.Name, func(t *testing.T) {
			checkVector(t, c.Value, nil, c.PromptHash)
		})
	}
}
