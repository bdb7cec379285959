package sandbox

import (
	"sync"
	"time"
)

// violationLog collects events from the relays and the teardown; safe for concurrent use.
type violationLog struct {
	mu     sync.Mutex
	events []Violation
	max    int
	lost   int
}

func newViolationLog() *violationLog { return &violationLog{max: 10000} }

func (v *violationLog) add(kind, detail string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	// A looping client must not grow the record without bound.
	if len(v.events) >= v.max {
		v.lost++
		return
	}
	v.events = append(v.events, Violation{Time: time.Now(), Kind: kind, Detail: detail})
}

func (v *violationLog) list() []Violation {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := append([]Violation(nil), v.events...)
	if v.lost > 0 {
		out = append(out, Violation{Time: time.Now(), Kind: "log-truncated", Detail: "further events were dropped"})
	}
	return out
}
