package bridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/kernel"
)

func TestCloseWithClientsHoldingOn(t *testing.T) {
	f := newFixture(t, Limits{CloseTimeout: 500 * time.Millisecond})
	c := newRaw(t, f)
	c.initialize("2025-11-25")

	// A call in flight.
	inflight := make(chan string, 1)
	go func() {
		_, body, _ := tryDo(c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test.block","arguments":{}}}`)
		inflight <- body
	}()
	<-f.testTools.entered
	// A connection that never finishes its request.
	half, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	fmt.Fprintf(half, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", f.addr)
	// An idle keep-alive connection.
	idle := newRaw(t, f)
	idle.do("POST", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil)

	start := time.Now()
	f.server.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s with clients holding connections", d)
	}
	select {
	case <-f.testTools.cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("the in-flight kernel call was not cancelled")
	}
	if body := <-inflight; strings.Contains(body, `"isError":false`) {
		t.Fatalf("in-flight call succeeded after Close: %s", body)
	}
	select {
	case err := <-f.serveErr:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Serve did not return after Close")
	}

	// A late connection finds a shut door, and the port can be bound again.
	if _, err := net.Dial("tcp", f.addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after Close: %v, want connection refused", err)
	}
	l, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatalf("port not released: %v", err)
	}
	l.Close()
	ev := f.server.Events()
	if countDecision(ev, DecisionCancelled) != 1 {
		t.Fatalf("cancelled call not recorded: %+v", ev)
	}
}

func TestCallsRacingClose(t *testing.T) {
	for round := range 5 {
		f := newFixture(t, Limits{RequestsPerSecond: 10000, Burst: 10000, MaxConcurrent: 64})
		clients := make([]*rawClient, 4)
		for i := range clients {
			clients[i] = newRaw(t, f)
			clients[i].hc.Timeout = 3 * time.Second
			clients[i].initialize("2025-11-25")
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var leaked []string
		start := make(chan struct{})
		for i, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for j := range 30 {
					body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"files.stat","arguments":{"path":[]}}}`, 100+j)
					if j%3 == 0 {
						body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, 100+j)
					}
					sentAfterClose := f.server.closed.Load()
					status, resp, err := tryDo(c, body)
					if err != nil {
						continue // refused or reset: a shut door
					}
					if sentAfterClose && status == 200 && strings.Contains(resp, `"tools":[`) {
						mu.Lock()
						leaked = append(leaked, fmt.Sprintf("client %d: catalogue served after Close", i))
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(round) * time.Millisecond)
		f.server.Close()
		wg.Wait()
		if len(leaked) > 0 {
			t.Fatalf("round %d: %v", round, leaked)
		}
		// After Close every call is refused: in band as turn_draining, or no connection.
		status, resp, err := tryDo(clients[0], `{"jsonrpc":"2.0","id":999,"method":"tools/call","params":{"name":"files.stat","arguments":{"path":[]}}}`)
		if err == nil && status == 200 && !strings.Contains(resp, kernel.CodeTurnDraining) {
			t.Fatalf("round %d: call after Close answered %d %s", round, status, resp)
		}
	}
}

// tryDo is rawClient.do without failing the test on transport errors.
func tryDo(c *rawClient, body string) (int, string, error) {
	req, err := http.NewRequest("POST", c.f.url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.f.token)
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", c.version)
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}
