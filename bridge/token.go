package bridge

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/sharedos/sharedos-run/canonjson"
	"github.com/sharedos/sharedos-run/policy"
)

// Claims are the five claims of a SharedOS execution token. The token names a broker
// session and carries no authority: its holder still gets only the turn's catalogue,
// and every call is still authorized when it is made.
type Claims struct {
	ExecutionID string `json:"executionId"`
	NamespaceID string `json:"namespaceId"`
	Actor       string `json:"actor"`
	CatalogHash string `json:"catalogHash"`
	ExpiresAt   string `json:"expiresAt"`
}

// ClaimNames lists the claim keys, for callers that accept expected claims by name.
func ClaimNames() []string {
	return []string{"executionId", "namespaceId", "actor", "catalogHash", "expiresAt"}
}

// TokenReason is why a token did not verify; "" means valid.
type TokenReason string

// Verification reasons, checked in this order.
const (
	TokenValid             TokenReason = ""
	TokenMalformed         TokenReason = "malformed"
	TokenSignatureMismatch TokenReason = "signature_mismatch"
	TokenExpired           TokenReason = "expired"
	TokenClaimsMismatch    TokenReason = "claims_mismatch"
)

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Validate checks the claims schema.
func (c Claims) Validate() error {
	if err := boundedClaim("executionId", c.ExecutionID, policy.MaxIdentifierLength); err != nil {
		return err
	}
	if err := boundedClaim("namespaceId", c.NamespaceID, policy.MaxIdentifierLength); err != nil {
		return err
	}
	if err := boundedClaim("actor", c.Actor, policy.MaxActorLength); err != nil {
		return err
	}
	if _, err := policy.ParseActor(c.Actor); err != nil {
		return fmt.Errorf("actor: %w", err)
	}
	if !hexHash.MatchString(c.CatalogHash) {
		return fmt.Errorf("catalogHash: must be 64 lowercase hex characters")
	}
	if _, err := parseExpiry(c.ExpiresAt); err != nil {
		return err
	}
	return nil
}

func boundedClaim(field, v string, max int) error {
	if n := policy.UTF16Len(v); n < 1 || n > max {
		return fmt.Errorf("%s: must be 1–%d characters, has %d", field, max, n)
	}
	return nil
}

// parseExpiry reads an RFC 3339 instant that carries an offset ("Z" or ±hh:mm).
func parseExpiry(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("expiresAt: not an RFC 3339 time with offset: %q", s)
	}
	return t, nil
}

// Value returns a claim by its wire name.
func (c Claims) Value(name string) (string, bool) {
	switch name {
	case "executionId":
		return c.ExecutionID, true
	case "namespaceId":
		return c.NamespaceID, true
	case "actor":
		return c.Actor, true
	case "catalogHash":
		return c.CatalogHash, true
	case "expiresAt":
		return c.ExpiresAt, true
	}
	return "", false
}

var b64 = base64.RawURLEncoding.Strict()

// MintToken signs the claims with the secret.
func MintToken(c Claims, secret []byte) (string, error) {
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("minting token: %w", err)
	}
	payloadJSON, err := canonjson.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("minting token: %w", err)
	}
	payload := b64.EncodeToString(payloadJSON)
	return payload + "." + sign(payload, secret), nil
}

func sign(payload string, secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(payload))
	return b64.EncodeToString(mac.Sum(nil))
}

// VerifyToken checks a token at instant now against expected claim values (by wire
// name). It never fails loudly: it returns the claims and a reason, checked in the
// SharedOS order (shape, signature, payload, expiry, expectations).
func VerifyToken(token string, secret []byte, now time.Time, expect map[string]string) (Claims, TokenReason) {
	parts := strings.Split(token, ".")
	if len(parts) != 2 {
		return Claims{}, TokenMalformed
	}
	want := sign(parts[0], secret)
	if subtle.ConstantTimeCompare([]byte(parts[1]), []byte(want)) != 1 {
		return Claims{}, TokenSignatureMismatch
	}
	c, err := decodeClaims(parts[0])
	if err != nil {
		return Claims{}, TokenMalformed
	}
	exp, _ := parseExpiry(c.ExpiresAt)
	if now.UnixMilli() >= exp.UnixMilli() {
		return c, TokenExpired
	}
	for name, v := range expect {
		got, known := c.Value(name)
		if !known || got != v {
			return c, TokenClaimsMismatch
		}
	}
	return c, TokenValid
}

func decodeClaims(payload string) (Claims, error) {
	raw, err := b64.DecodeString(payload)
	if err != nil {
		return Claims{}, err
	}
	// Exactly the five claims, each a string: a missing key is as malformed as an
	// extra one.
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil {
		return Claims{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Claims{}, errors.New("trailing data after the claims")
	}
	if len(fields) != len(ClaimNames()) {
		return Claims{}, errors.New("claims must have exactly five keys")
	}
	var c Claims
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&c); err != nil {
		return Claims{}, err
	}
	for _, name := range ClaimNames() {
		var s string
		if err := json.Unmarshal(fields[name], &s); err != nil {
			return Claims{}, fmt.Errorf("claim %s must be a string", name)
		}
	}
	return c, c.Validate()
}
