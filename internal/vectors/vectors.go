// Package vectors loads the SharedOS wire vectors (testdata/wire-vectors.json) for
// tests in every package, so that each test reads the file rather than pasting it.
package vectors

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// File is the vectors document.
type File struct {
	Canonical []struct {
		Name      string `json:"name"`
		InputJSON string `json:"inputJSON"`
		Canonical string `json:"canonical"`
		SHA256    string `json:"sha256"`
	} `json:"canonical"`
	Catalogues []struct {
		Name        string          `json:"name"`
		Tools       json.RawMessage `json:"tools"`
		Canonical   string          `json:"canonical"`
		CatalogHash string          `json:"catalogHash"`
	} `json:"catalogues"`
	Tokens []struct {
		Name   string          `json:"name"`
		Claims json.RawMessage `json:"claims"`
		Secret string          `json:"secret"`
		Token  string          `json:"token"`
		Checks []struct {
			Now    string            `json:"now"`
			Secret string            `json:"secret"`
			Expect map[string]string `json:"expect"`
			Result string            `json:"result"`
		} `json:"checks"`
	} `json:"tokens"`
	Policies []struct {
		Name       string          `json:"name"`
		Policy     json.RawMessage `json:"policy"`
		Canonical  string          `json:"canonical"`
		PolicyHash string          `json:"policyHash"`
	} `json:"policies"`
	Prompts []struct {
		Name       string          `json:"name"`
		Value      json.RawMessage `json:"value"`
		PromptHash string          `json:"promptHash"`
	} `json:"prompts"`
}

// Path is the vectors file in the repository's testdata.
func Path() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "testdata", "wire-vectors.json")
}

// Load reads and decodes the vectors.
func Load() (*File, error) {
	data, err := os.ReadFile(Path())
	if err != nil {
		return nil, fmt.Errorf("reading wire vectors: %w", err)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decoding wire vectors: %w", err)
	}
	return &f, nil
}
