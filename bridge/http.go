package bridge

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

// JSON-RPC error codes the guard answers with.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

// writeRPCError answers with a JSON-RPC error body and an HTTP status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := marshalJS(rpcErrorResponse{JSONRPC: "2.0", ID: id, Error: rpcError{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// serveGuarded applies, in order: path and method, rate, concurrency, the token,
// the end of the turn, and the body checks; then hands the request to the SDK's
// Streamable HTTP handler (which also checks Host).
func (s *Server) serveGuarded(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		s.reject(w, r, http.StatusNotFound, "no MCP endpoint at "+r.URL.Path)
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodDelete:
	default:
		// No standalone SSE stream (GET): the bridge only answers requests, and an
		// open stream per client would be one more thing holding a turn open.
		w.Header().Set("Allow", "POST, DELETE")
		s.reject(w, r, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed")
		return
	}
	if !s.limiter.Allow() {
		w.Header().Set("Retry-After", "1")
		s.reject(w, r, http.StatusTooManyRequests, "too many requests: the bridge takes at most "+fmt.Sprint(s.limits.RequestsPerSecond)+" per second")
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		s.reject(w, r, http.StatusServiceUnavailable, fmt.Sprintf("too many concurrent requests: the bridge serves at most %d at once", s.limits.MaxConcurrent))
		return
	}
	if !s.authenticate(w, r) {
		return
	}
	if r.Method == http.MethodDelete {
		s.streamable.ServeHTTP(w, r)
		return
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/json" {
		s.reject(w, r, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.rejectRPC(w, r, http.StatusRequestEntityTooLarge, nil, rpcInvalidRequest, fmt.Sprintf("request body is larger than %d bytes", s.limits.MaxBodyBytes))
			return
		}
		s.reject(w, r, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		s.rejectRPC(w, r, http.StatusBadRequest, nil, rpcInvalidRequest, "JSON-RPC batches are not supported")
		return
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(trimmed, &msg) != nil {
		s.rejectRPC(w, r, http.StatusBadRequest, nil, rpcParseError, "the request body is not a JSON-RPC message")
		return
	}
	switch {
	case msg.Method == "server/discover":
		// Answer the sessionless probe the way a pre-2026 server does, so the client
		// falls back to initialize.
		writeRPCError(w, http.StatusOK, msg.ID, rpcMethodNotFound, "method not found: server/discover")
		return
	case s.closed.Load() && msg.Method == "tools/call":
		// The turn has ended and its sessions with it: the call gets the in-band
		// refusal the drained kernel would give, and nothing else.
		s.refuseLateCall(w, msg.ID)
		return
	case s.closed.Load():
		s.rejectRPC(w, r, http.StatusServiceUnavailable, msg.ID, rpcInvalidRequest, "the turn has ended")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	s.streamable.ServeHTTP(w, r)
}

func (s *Server) refuseLateCall(w http.ResponseWriter, id json.RawMessage) {
	res := kernel.Result{Status: kernel.Denied, Code: kernel.CodeTurnDraining, Message: "the turn has ended; no further calls are accepted"}
	body, _, err := renderCall(res, nil, s.limits.MaxResultBytes)
	if err != nil {
		http.Error(w, "the turn has ended", http.StatusServiceUnavailable)
		return
	}
	s.log.add(Event{Time: s.clock(), Kind: EventCall, Decision: string(kernel.Denied), Code: kernel.CodeTurnDraining, Detail: "after the turn closed"})
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out, _ := marshalJS(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, body})
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

// authenticate checks the bearer token against the turn on every request.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	reason := TokenMalformed
	if ok && token != "" {
		now := s.clock()
		if s.verified.matches(token, now) {
			return true
		}
		var claims Claims
		claims, reason = VerifyToken(token, s.opts.Secret, now, s.expect)
		if reason == TokenValid {
			s.verified.remember(token, claims)
			return true
		}
	} else {
		reason = "missing"
	}
	s.log.add(Event{Time: s.clock(), Kind: EventUnauthenticated, HTTPStatus: http.StatusUnauthorized, Detail: string(reason)})
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="sharedos", error="invalid_token", error_description=%q`, reason))
	http.Error(w, "unauthorized: "+string(reason), http.StatusUnauthorized)
	return false
}

// verifiedToken remembers the last token that verified, so that the HMAC and the
// claims are not recomputed on every request of a turn. Expiry is still checked
// each time; any other token string goes through full verification.
type verifiedToken struct {
	mu      sync.Mutex
	token   string
	expires time.Time
}

func (v *verifiedToken) matches(token string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(v.token)) == 1 && now.UnixMilli() < v.expires.UnixMilli()
}

func (v *verifiedToken) remember(token string, c Claims) {
	exp, err := parseExpiry(c.ExpiresAt)
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.token, v.expires = token, exp
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.log.add(Event{Time: s.clock(), Kind: EventRejected, HTTPStatus: status, Detail: r.Method + " " + r.URL.Path + ": " + msg})
	http.Error(w, msg, status)
}

func (s *Server) rejectRPC(w http.ResponseWriter, r *http.Request, status int, id json.RawMessage, code int, msg string) {
	s.log.add(Event{Time: s.clock(), Kind: EventRejected, HTTPStatus: status, Detail: r.Method + " " + r.URL.Path + ": " + msg})
	writeRPCError(w, status, id, code, msg)
}
