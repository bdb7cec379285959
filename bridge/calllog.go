package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"
)

// EventKind says what the bridge saw.
type EventKind string

// Event kinds.
const (
	// EventInitialize: a client completed initialize (the harness reached the bridge).
	EventInitialize EventKind = "initialize"
	// EventList: a client listed the catalogue.
	EventList EventKind = "list"
	// EventCall: a tools/call, whatever its outcome.
	EventCall EventKind = "call"
	// EventUnauthenticated: an HTTP request without a valid token (answered 401).
	EventUnauthenticated EventKind = "unauthenticated"
	// EventRejected: an HTTP request refused before MCP (limits, bad body, method).
	EventRejected EventKind = "rejected"
)

// Decision of a call as recorded: the kernel's status, or cancelled.
const (
	DecisionCancelled = "cancelled"
)

// Event is one entry of the bridge's call log. Argument values are never kept: only
// their size and SHA-256.
type Event struct {
	Time            time.Time `json:"time"`
	Kind            EventKind `json:"kind"`
	CallID          string    `json:"callId,omitempty"`
	Tool            string    `json:"tool,omitempty"`
	Alias           string    `json:"alias,omitempty"`
	Resource        []string  `json:"resource,omitempty"`
	Namespace       string    `json:"namespace,omitempty"`
	Action          string    `json:"action,omitempty"`
	Decision        string    `json:"decision,omitempty"`
	Code            string    `json:"code,omitempty"`
	Message         string    `json:"message,omitempty"`
	GrantID         string    `json:"grantId,omitempty"`
	DurationMillis  float64   `json:"durationMs,omitempty"`
	ArgumentsBytes  int       `json:"argumentsBytes,omitempty"`
	ArgumentsSHA256 string    `json:"argumentsSha256,omitempty"`
	HTTPStatus      int       `json:"httpStatus,omitempty"`
	Detail          string    `json:"detail,omitempty"`
	Client          string    `json:"client,omitempty"`
	ProtocolVersion string    `json:"protocolVersion,omitempty"`
}

// maxMessageBytes caps messages kept in events (a refusal message is short; a
// handler's error could be long).
const maxMessageBytes = 512

func digest(args []byte) (int, string) {
	if len(args) == 0 {
		return 0, ""
	}
	sum := sha256.Sum256(args)
	return len(args), hex.EncodeToString(sum[:])
}

func capString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// callLog keeps events in order and hands each to the optional sink.
type callLog struct {
	mu     sync.Mutex
	events []Event
	sink   func(Event)
}

func (l *callLog) add(e Event) {
	e.Message = capString(e.Message, maxMessageBytes)
	e.Detail = capString(e.Detail, maxMessageBytes)
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	if l.sink != nil {
		l.sink(e)
	}
}

func (l *callLog) snapshot() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}
