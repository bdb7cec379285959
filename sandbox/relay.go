package sandbox

import (
	"io"
	"net"
	"sync"
)

// connSet tracks live connections so that teardown can close them all.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newConnSet() *connSet { return &connSet{conns: map[net.Conn]struct{}{}} }

// add registers c; false when the set is already closed (c is closed then).
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) drop(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// splice copies both ways until either side is done, then closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// Half-close so that the peer sees EOF while the other direction drains.
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// serveLoop accepts on l until it is closed, handing each connection to handle.
func serveLoop(l net.Listener, set *connSet, handle func(net.Conn)) {
	set.wg.Add(1)
	go func() {
		defer set.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if !set.add(c) {
				continue
			}
			set.wg.Add(1)
			go func() {
				defer set.wg.Done()
				defer set.drop(c)
				handle(c)
			}()
		}
	}()
}
