package bridge

import (
	"context"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The baseline: a bare go-sdk server on the same transport (stateful Streamable
// HTTP, JSON responses) with one no-op tool, no token, no kernel.
func bareServer(b *testing.B) string {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(l)
	b.Cleanup(func() { hs.Close() })
	return "http://" + l.Addr().String() + "/mcp"
}

type benchTarget struct {
	name   string
	url    string
	client *http.Client
	tool   string
	args   map[string]any
}

func benchTargets(b *testing.B) []benchTarget {
	f := newFixture(b, Limits{RequestsPerSecond: 1e9, Burst: 1 << 30, MaxConcurrent: 1024})
	return []benchTarget{
		{name: "bare-go-sdk", url: bareServer(b), client: &http.Client{}, tool: "noop", args: map[string]any{}},
		{name: "bridge", url: f.url, client: f.httpClient(), tool: "files.stat", args: map[string]any{"path": []string{"README.md"}}},
	}
}

func connect(b *testing.B, t benchTarget) *mcp.ClientSession {
	b.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: t.url, HTTPClient: t.client}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// BenchmarkCallRoundTrip: one tools/call at a time through one session.
func BenchmarkCallRoundTrip(b *testing.B) {
	for _, target := range benchTargets(b) {
		b.Run(target.name, func(b *testing.B) {
			cs := connect(b, target)
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: target.tool, Arguments: target.args}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				res, err := cs.CallTool(ctx, params)
				if err != nil || res.IsError {
					b.Fatalf("call: %v %+v", err, res)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(percentile(lat, 0.50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkThroughput8Clients: eight sessions calling at once.
func BenchmarkThroughput8Clients(b *testing.B) {
	const clients = 8
	for _, target := range benchTargets(b) {
		b.Run(target.name, func(b *testing.B) {
			sessions := make([]*mcp.ClientSession, clients)
			for i := range sessions {
				sessions[i] = connect(b, target)
			}
			params := &mcp.CallToolParams{Name: target.tool, Arguments: target.args}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for i, cs := range sessions {
				n := b.N / clients
				if i < b.N%clients {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range n {
						if res, err := cs.CallTool(context.Background(), params); err != nil || res.IsError {
							b.Errorf("call: %v %+v", err, res)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}

// BenchmarkIdleSessionHeap: heap held per initialized, listed, idle session.
func BenchmarkIdleSessionHeap(b *testing.B) {
	for _, target := range benchTargets(b) {
		b.Run(target.name, func(b *testing.B) {
			// Each op opens one session and leaves it idle; capped so that both ends'
			// sockets stay well under the file-descriptor limit.
			sessions := min(b.N, 200)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range sessions {
				cs := connect(b, target)
				if _, err := cs.ListTools(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// Client and server share the process: this is both ends of each session.
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(sessions), "heap-B/session")
		})
	}
}
