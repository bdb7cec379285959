package sandbox

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"

	"golang.org/x/sys/unix"
)

// The stub opens raw TCP sockets in the namespace and hands them over: the only
// connections the sandbox can attempt are on loopback, and the kernel answers one to a
// port nobody serves with a RST. Seeing those RSTs is how refused attempts (a harness
// trying the host's services by their usual ports) reach the violation log.

// openRawTCP is called in the stub, inside the network namespace: a raw TCP socket
// gets a copy of every TCP segment the namespace receives. (A packet socket would do
// too, but closing one waits for an RCU grace period: tens of milliseconds per run.)
func openRawTCP(family int) (*os.File, error) {
	fd, err := unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "netwatch"), nil
}

// pollable turns a received descriptor into a non-blocking file registered with the
// runtime poller, so that Close interrupts a pending read. It consumes f.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// watchRefusals reads frames until f is closed and logs each refused connection.
func watchRefusals(f *os.File, viol *violationLog) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 256)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
			return rerr != unix.EAGAIN
		})
		if err != nil || (rerr != nil && rerr != unix.EINTR) {
			return
		}
		if n > len(buf) {
			n = len(buf)
		}
		seg := buf[:n]
		var src netip.Addr
		switch a := from.(type) {
		case *unix.SockaddrInet4:
			// IPv4 raw sockets see the IP header; IPv6 ones only the segment.
			if n < 20 {
				continue
			}
			seg = seg[int(seg[0]&0x0f)*4:]
			src = netip.AddrFrom4(a.Addr)
		case *unix.SockaddrInet6:
			src = netip.AddrFrom16(a.Addr)
		default:
			continue
		}
		if port, ok := refusedSYN(seg); ok {
			viol.add(ViolationPortDenied, fmt.Sprintf("TCP connection to %s refused: nothing is allowed on port %d", netip.AddrPortFrom(src, port), port))
		}
	}
}

// refusedSYN recognises the kernel's answer to a SYN on a closed port in a TCP segment:
// RST|ACK with sequence number 0, sent from the refused port, which it returns.
func refusedSYN(tcp []byte) (uint16, bool) {
	if len(tcp) < 20 {
		return 0, false
	}
	const rst, ack = 0x04, 0x10
	flags, seq := tcp[13], binary.BigEndian.Uint32(tcp[4:8])
	if flags&(rst|ack) != rst|ack || seq != 0 {
		return 0, false
	}
	return binary.BigEndian.Uint16(tcp[0:2]), true
}
