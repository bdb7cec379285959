package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The launcher and the stub talk over a SOCK_SEQPACKET socketpair: one JSON message per
// packet, descriptors riding along with SCM_RIGHTS.

// stubConfig is what the launcher tells the stub.
type stubConfig struct {
	Probe bool `json:"probe,omitempty"`
	// Listeners to open inside: ephemeral ports unless Port is set.
	Listeners []listenSpec `json:"listeners,omitempty"`
	Mounts    mountPlan    `json:"mounts"`
}

type listenSpec struct {
	Name string `json:"name"`
	Host string `json:"host"` // "127.0.0.1" or "::1"
	Port int    `json:"port"`
	// Optional listeners (a mirror's ::1 twin) are skipped when the address is missing.
	Optional bool `json:"optional,omitempty"`
}

// stubMsg is every message either side sends; one field set per message.
type stubMsg struct {
	Config *stubConfig `json:"config,omitempty"`
	// Ready: the stub is set up; Opened names the descriptors that ride with it.
	Ready  bool      `json:"ready,omitempty"`
	Opened []string  `json:"opened,omitempty"`
	Go     bool      `json:"go,omitempty"`
	Run    *goConfig `json:"run,omitempty"`
	Error  string    `json:"error,omitempty"`
	// Started carries the command's PID inside the namespace.
	Started int       `json:"started,omitempty"`
	Exit    *stubExit `json:"exit,omitempty"`
}

type stubExit struct {
	Code      int        `json:"code"`
	Signal    int        `json:"signal,omitempty"`
	Survivors []survivor `json:"survivors,omitempty"`
	ExecError string     `json:"execError,omitempty"`
}

type survivor struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

const maxMsg = 1 << 20

func sendMsg(fd int, m stubMsg, files ...*os.File) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxMsg {
		return fmt.Errorf("message of %d bytes is too large", len(b))
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	for {
		err = unix.Sendmsg(fd, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// recvBufs recycles recvMsg's buffers: a fresh 1 MiB for every message made each
// launch run the garbage collector once or twice for nothing.
var recvBufs = sync.Pool{New: func() any { return new([maxMsg]byte) }}

// recvMsg reads one message; received descriptors come back as files, close-on-exec.
func recvMsg(fd int) (stubMsg, []*os.File, error) {
	var m stubMsg
	bp := recvBufs.Get().(*[maxMsg]byte)
	defer recvBufs.Put(bp) // json.Unmarshal copies what it keeps
	buf := bp[:]
	oob := make([]byte, unix.CmsgSpace(4*64))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return m, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return m, nil, fmt.Errorf("parse control message: %w", err)
		}
		for _, c := range cmsgs {
			fds, err := unix.ParseUnixRights(&c)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "passed"))
			}
		}
	}
	if n == 0 {
		return m, files, errors.New("peer closed the control socket")
	}
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		for _, f := range files {
			f.Close()
		}
		return m, nil, fmt.Errorf("decode message: %w", err)
	}
	return m, files, nil
}
