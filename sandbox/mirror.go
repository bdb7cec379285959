package sandbox

import (
	"fmt"
	"net"
	"time"
)

// mirror forwards connections made inside the sandbox to a port on the host's loopback:
// a local model server keeps its URL.
type mirror struct {
	port  int
	conns *connSet
}

func (m *mirror) handle(c net.Conn) {
	up, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", m.port), 10*time.Second)
	if err != nil {
		return
	}
	if !m.conns.add(up) {
		return
	}
	defer m.conns.drop(up)
	splice(c, up)
}
