package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ttyRelay connects the caller's stdio to the pty master and forwards window sizes.
type ttyRelay struct {
	master  *os.File // non-blocking dup: Close interrupts a pending Read
	tty     *os.File // the slave side, handed to the stub
	outDone chan struct{}
	started bool
	stopWin func()
	once    sync.Once
}

// openTTY allocates the pty. creack/pty hands back a blocking master; a goroutine
// blocked reading a blocking fd is not woken by Close, so the relay reads a
// non-blocking duplicate that the runtime poller can interrupt.
func openTTY(stdin io.Reader) (*ttyRelay, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	fd, err := unix.Dup(int(ptmx.Fd()))
	ptmx.Close()
	if err != nil {
		tty.Close()
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		tty.Close()
		return nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	r := &ttyRelay{master: os.NewFile(uintptr(fd), "ptmx"), tty: tty, outDone: make(chan struct{}), stopWin: func() {}}
	if in, ok := stdin.(*os.File); ok && isTerminal(in) {
		_ = pty.InheritSize(in, r.tty)
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, unix.SIGWINCH)
		done := make(chan struct{})
		go func() {
			for {
				select {
				case <-ch:
					_ = pty.InheritSize(in, r.tty)
				case <-done:
					return
				}
			}
		}()
		r.stopWin = func() { signal.Stop(ch); close(done) }
	}
	return r, nil
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// start copies stdin to the pty and the pty to stdout.
func (r *ttyRelay) start(stdin io.Reader, stdout io.Writer) {
	r.started = true
	if stdin != nil {
		go func() { _, _ = io.Copy(r.master, stdin) }()
	}
	go func() {
		defer close(r.outDone)
		if stdout == nil {
			stdout = io.Discard
		}
		_, err := io.Copy(stdout, r.master)
		// EIO is how a pty master says the last slave closed.
		if err != nil && !errors.Is(err, unix.EIO) && !errors.Is(err, os.ErrClosed) {
			return
		}
	}()
}

// closeSlave drops the launcher's copy of the slave once the stub has its own, so that
// the master sees EIO when the command and its children are gone.
func (r *ttyRelay) closeSlave() { r.tty.Close() }

// finish drains what the command wrote (bounded), then closes the master.
func (r *ttyRelay) finish(wait time.Duration) {
	r.once.Do(func() {
		r.stopWin()
		r.tty.Close()
		if !r.started {
			r.master.Close()
			return
		}
		select {
		case <-r.outDone:
		case <-time.After(wait):
		}
		r.master.Close()
		<-r.outDone
	})
}
