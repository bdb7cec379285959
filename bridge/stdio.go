package bridge

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// stdioDrain lets a stdio client send its requests and close its end at once
// (`printf … | sharedos-run mcp serve --stdio`): when the input ends, the reader
// holds back EOF until every request read so far has been answered, or until the
// wait bound passes. Without it the session would end with its answers unwritten.
type stdioDrain struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending int
	partial []byte
	wait    time.Duration
}

func newStdioDrain(wait time.Duration) *stdioDrain {
	d := &stdioDrain{wait: wait}
	d.cond = sync.NewCond(&d.mu)
	return d
}

type rpcShape struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func isRequest(line []byte) bool {
	var m rpcShape
	return json.Unmarshal(line, &m) == nil && len(m.ID) > 0 && string(m.ID) != "null" && m.Method != ""
}

func isResponse(msg []byte) bool {
	var m rpcShape
	return json.Unmarshal(msg, &m) == nil && len(m.ID) > 0 && m.Method == "" && (m.Result != nil || m.Error != nil)
}

func (d *stdioDrain) sawInput(p []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.partial = append(d.partial, p...)
	for {
		i := bytes.IndexByte(d.partial, '\n')
		if i < 0 {
			return
		}
		if isRequest(bytes.TrimSpace(d.partial[:i])) {
			d.pending++
		}
		d.partial = d.partial[i+1:]
	}
}

func (d *stdioDrain) sawOutput(p []byte) {
	n := 0
	for _, line := range bytes.Split(p, []byte("\n")) {
		if isResponse(bytes.TrimSpace(line)) {
			n++
		}
	}
	if n == 0 {
		return
	}
	d.mu.Lock()
	d.pending -= n
	d.mu.Unlock()
	d.cond.Broadcast()
}

// awaitAnswers blocks until nothing is pending or the wait bound passes.
func (d *stdioDrain) awaitAnswers() {
	timer := time.AfterFunc(d.wait, func() {
		d.mu.Lock()
		d.pending = 0
		d.mu.Unlock()
		d.cond.Broadcast()
	})
	defer timer.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.pending > 0 {
		d.cond.Wait()
	}
}

type drainReader struct {
	io.ReadCloser
	d *stdioDrain
}

func (r drainReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.d.sawInput(p[:n])
	}
	if err == io.EOF {
		r.d.awaitAnswers()
	}
	return n, err
}

type drainWriter struct {
	io.WriteCloser
	d *stdioDrain
}

func (w drainWriter) Write(p []byte) (int, error) {
	n, err := w.WriteCloser.Write(p)
	w.d.sawOutput(p[:n])
	return n, err
}
