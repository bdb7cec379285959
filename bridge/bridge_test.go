package bridge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/internal/vectors"
	"github.com/sharedos/sharedos-run/kernel"
	"github.com/sharedos/sharedos-run/policy"
)

func loadVectors(t testing.TB) *vectors.File {
	t.Helper()
	v, err := vectors.Load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCatalogueVectors(t *testing.T) {
	v := loadVectors(t)
	if len(v.Catalogues) == 0 {
		t.Fatal("no catalogue vectors")
	}
	for _, cv := range v.Catalogues {
		t.Run(cv.Name, func(t *testing.T) {
			var tools []PublishedTool
			if err := json.Unmarshal(cv.Tools, &tools); err != nil {
				t.Fatal(err)
			}
			// Round-trip through the kernel's registration shape, so the projection
			// (not just the hash) is what is checked.
			var registered []*kernel.Tool
			for _, pt := range tools {
				registered = append(registered, &kernel.Tool{
					Name: pt.Name, Description: pt.Description, InputSchema: pt.InputSchema, OutputSchema: pt.OutputSchema,
					Namespace: pt.Metadata.Namespace, Source: pt.Metadata.Source, ReadWrite: readWriteOf(pt),
					Destructive: pt.Annotations.DestructiveHint, Idempotent: pt.Annotations.IdempotentHint,
				})
			}
			cat, err := NewCatalog("exec-1", registered)
			if err != nil {
				t.Fatal(err)
			}
			if cat.CatalogHash != cv.CatalogHash {
				t.Fatalf("catalogHash %s, want %s", cat.CatalogHash, cv.CatalogHash)
			}
		})
	}
}

func readWriteOf(pt PublishedTool) kernel.ReadWrite {
	if pt.Annotations.ReadOnlyHint {
		return kernel.Read
	}
	return kernel.Write
}

func TestProjectionKeepsOnlyPublishedFields(t *testing.T) {
	yes := true
	tool := &kernel.Tool{
		Name: "files.delete", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`),
		Namespace: "files", Source: "sharedos", ReadWrite: kernel.Write, Destructive: &yes,
		Ceiling: policy.Capability{Resource: policy.Resource{Namespace: "files", Path: []string{"secret-ceiling"}}, Actions: []string{"delete"}, Scope: policy.ScopeDescendants},
	}
	data, err := json.Marshal(Project(tool))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	json.Unmarshal(data, &keys)
	for k := range keys {
		switch k {
		case "name", "description", "inputSchema", "annotations", "metadata":
		default:
			t.Errorf("published key %q", k)
		}
	}
	if strings.Contains(string(data), "secret-ceiling") || strings.Contains(string(data), "openWorldHint") {
		t.Errorf("projection leaks: %s", data)
	}
	if got := string(keys["annotations"]); got != `{"readOnlyHint":false,"destructiveHint":true}` {
		t.Errorf("annotations %s", got)
	}
}

func TestEmptyCatalogue(t *testing.T) {
	cat, err := NewCatalog("exec-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cat.CatalogHash != "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945" || cat.Tools == nil {
		t.Fatalf("empty catalogue: %+v", cat)
	}
}

func TestPortableNames(t *testing.T) {
	mk := func(names ...string) Catalog {
		var c Catalog
		for _, n := range names {
			c.Tools = append(c.Tools, PublishedTool{Name: n})
		}
		return c
	}
	cases := []struct {
		cat              Catalog
		sent, name, alis string
	}{
		{mk("files.read", "files.stat"), "files.read", "files.read", ""},
		{mk("files.read", "files.stat"), "files_read", "files.read", "files_read"},
		{mk("files.snapshot.list"), "files_snapshot_list", "files.snapshot.list", "files_snapshot_list"},
		// Two tools share a portable name: ambiguous, the raw name goes through.
		{mk("a.b_c", "a_b.c"), "a_b_c", "a_b_c", ""},
		// A real tool named with underscores wins over the mapping.
		{mk("a_b", "a.b"), "a_b", "a_b", ""},
		// Client-side prefixes are never stripped.
		{mk("files.read"), "mcp__sharedos__files_read", "mcp__sharedos__files_read", ""},
		{mk("files.read"), "nope", "nope", ""},
	}
	for _, tc := range cases {
		name, alias := tc.cat.ResolveName(tc.sent)
		if name != tc.name || alias != tc.alis {
			t.Errorf("ResolveName(%q) = %q,%q; want %q,%q", tc.sent, name, alias, tc.name, tc.alis)
		}
	}
}

func TestTokenVectors(t *testing.T) {
	v := loadVectors(t)
	if len(v.Tokens) == 0 {
		t.Fatal("no token vectors")
	}
	for _, tv := range v.Tokens {
		t.Run(tv.Name, func(t *testing.T) {
			if len(tv.Claims) > 0 {
				var c Claims
				if err := json.Unmarshal(tv.Claims, &c); err != nil {
					t.Fatal(err)
				}
				tok, err := MintToken(c, []byte(tv.Secret))
				if err != nil {
					t.Fatal(err)
				}
				if tok != tv.Token {
					t.Fatalf("minted %s\nwant   %s", tok, tv.Token)
				}
			}
			for _, chk := range tv.Checks {
				now, err := time.Parse(time.RFC3339Nano, chk.Now)
				if err != nil {
					t.Fatal(err)
				}
				_, reason := VerifyToken(tv.Token, []byte(chk.Secret), now, chk.Expect)
				got := string(reason)
				if reason == TokenValid {
					got = "valid"
				}
				if got != chk.Result {
					t.Errorf("verify at %s with %q expecting %v: %s, want %s", chk.Now, chk.Secret, chk.Expect, got, chk.Result)
				}
			}
		})
	}
}

func validClaims() Claims {
	return Claims{ExecutionID: "exec-1", NamespaceID: "world-1", Actor: "agent:bob", CatalogHash: strings.Repeat("a", 64), ExpiresAt: "2026-08-23T01:00:00.000+02:00"}
}

func TestTokenReasons(t *testing.T) {
	secret := []byte("s3cret")
	good, err := MintToken(validClaims(), secret)
	if err != nil {
		t.Fatal(err)
	}
	payload, sig, _ := strings.Cut(good, ".")
	mint := func(raw string) string {
		p := b64.EncodeToString([]byte(raw))
		return p + "." + sign(p, secret)
	}
	now := time.Date(2026, 8, 22, 22, 0, 0, 0, time.UTC) // expiry is 23:00Z
	cases := []struct {
		name   string
		token  string
		now    time.Time
		expect map[string]string
		want   TokenReason
	}{
		{"valid", good, now, nil, TokenValid},
		{"valid with expectations", good, now, map[string]string{"executionId": "exec-1", "catalogHash": strings.Repeat("a", 64)}, TokenValid},
		{"one segment", payload, now, nil, TokenMalformed},
		{"three segments", good + ".x", now, nil, TokenMalformed},
		{"empty", "", now, nil, TokenMalformed},
		{"signature of another payload", payload + "x." + sig, now, nil, TokenSignatureMismatch},
		{"padded signature", good + "=", now, nil, TokenSignatureMismatch},
		{"signed garbage", mint("not json"), now, nil, TokenMalformed},
		{"signed extra claim", mint(`{"actor":"agent:bob","catalogHash":"` + strings.Repeat("a", 64) + `","executionId":"e","expiresAt":"2026-08-23T01:00:00Z","namespaceId":"w","x":"1"}`), now, nil, TokenMalformed},
		{"signed missing claim", mint(`{"actor":"agent:bob","catalogHash":"` + strings.Repeat("a", 64) + `","executionId":"e","expiresAt":"2026-08-23T01:00:00Z"}`), now, nil, TokenMalformed},
		{"signed bad hash", mint(`{"actor":"agent:bob","catalogHash":"ABC","executionId":"e","expiresAt":"2026-08-23T01:00:00Z","namespaceId":"w"}`), now, nil, TokenMalformed},
		{"signed expiry without offset", mint(`{"actor":"agent:bob","catalogHash":"` + strings.Repeat("a", 64) + `","executionId":"e","expiresAt":"2026-08-23T01:00:00","namespaceId":"w"}`), now, nil, TokenMalformed},
		{"expired at the instant", good, time.Date(2026, 8, 22, 23, 0, 0, 0, time.UTC), nil, TokenExpired},
		{"one millisecond before", good, time.Date(2026, 8, 22, 22, 59, 59, 999_999_999, time.UTC), nil, TokenValid},
		{"expired beats mismatch", good, now.Add(2 * time.Hour), map[string]string{"executionId": "other"}, TokenExpired},
		{"other execution", good, now, map[string]string{"executionId": "exec-2"}, TokenClaimsMismatch},
		{"other catalogue", good, now, map[string]string{"catalogHash": strings.Repeat("b", 64)}, TokenClaimsMismatch},
		{"unknown expectation", good, now, map[string]string{"role": "admin"}, TokenClaimsMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := VerifyToken(tc.token, secret, tc.now, tc.expect); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMintRefusesBadClaims(t *testing.T) {
	mutations := map[string]func(*Claims){
		"empty execution":  func(c *Claims) { c.ExecutionID = "" },
		"long execution":   func(c *Claims) { c.ExecutionID = strings.Repeat("x", 257) },
		"actor kind":       func(c *Claims) { c.Actor = "bot:x" },
		"uppercase hash":   func(c *Claims) { c.CatalogHash = strings.Repeat("A", 64) },
		"expiry no offset": func(c *Claims) { c.ExpiresAt = "2026-08-23T01:00:00" },
	}
	for name, m := range mutations {
		c := validClaims()
		m(&c)
		if _, err := MintToken(c, []byte("s")); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
}

func FuzzVerifyToken(f *testing.F) {
	secret := []byte("fuzz-secret")
	good, err := MintToken(validClaims(), secret)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 8, 22, 22, 0, 0, 0, time.UTC)
	f.Add(good, 0, byte('A'))
	f.Add("not-a-token", 0, byte('.'))
	f.Add(good, len(good)-1, byte('B'))
	f.Add(good, 10, byte('='))
	f.Fuzz(func(t *testing.T, token string, pos int, b byte) {
		// Arbitrary input never panics and is valid only if it is the real token.
		if _, r := VerifyToken(token, secret, now, nil); r == TokenValid && token != good {
			t.Fatalf("forged token accepted: %q", token)
		}
		// A mutation of the good token is never valid.
		if len(good) == 0 {
			return
		}
		if pos < 0 {
			pos = -pos
		}
		pos %= len(good)
		mutated := good[:pos] + string(b) + good[pos+1:]
		if mutated == good {
			return
		}
		if _, r := VerifyToken(mutated, secret, now, nil); r == TokenValid {
			t.Fatalf("mutated token accepted: %q", mutated)
		}
	})
}
