package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/sharedos/sharedos-run/kernel"
)

// ServerName is the serverInfo name harnesses see, and the managed MCP server name a
// ToolPolicy lists.
const ServerName = "sharedos"

// Path is where the bridge serves MCP.
const Path = "/mcp"

// Limits bound what one client can make the bridge do. Each has a default; a test
// crosses each one.
type Limits struct {
	// MaxBodyBytes caps a request body (413 past it).
	MaxBodyBytes int64
	// MaxConcurrent caps requests being served at once (503 past it, at once, no queue).
	MaxConcurrent int
	// RequestsPerSecond and Burst shape the request rate (429 past it).
	RequestsPerSecond float64
	Burst             int
	// ReadHeaderTimeout and ReadTimeout bound how long a client may take to send a
	// request's headers, and headers plus body.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// IdleTimeout closes keep-alive connections that stay silent.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps request headers.
	MaxHeaderBytes int
	// CallTimeout is the deadline of one tools/call; past it the call fails in band.
	CallTimeout time.Duration
	// MaxResultBytes caps a rendered tools/call result; past it the call fails in band.
	MaxResultBytes int
	// CloseTimeout bounds Close even when a client holds a connection open.
	CloseTimeout time.Duration
	// SessionIdleTimeout closes MCP sessions with no request for this long.
	SessionIdleTimeout time.Duration
}

// DefaultLimits are the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:       1 << 20,
		MaxConcurrent:      16,
		RequestsPerSecond:  100,
		Burst:              200,
		ReadHeaderTimeout:  5 * time.Second,
		ReadTimeout:        30 * time.Second,
		IdleTimeout:        2 * time.Minute,
		MaxHeaderBytes:     64 << 10,
		CallTimeout:        2 * time.Minute,
		MaxResultBytes:     1 << 20,
		CloseTimeout:       2 * time.Second,
		SessionIdleTimeout: 30 * time.Minute,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&l.MaxBodyBytes, d.MaxBodyBytes)
	for _, p := range []struct {
		v   *int
		def int
	}{{&l.MaxConcurrent, d.MaxConcurrent}, {&l.Burst, d.Burst}, {&l.MaxHeaderBytes, d.MaxHeaderBytes}, {&l.MaxResultBytes, d.MaxResultBytes}} {
		if *p.v <= 0 {
			*p.v = p.def
		}
	}
	if l.RequestsPerSecond <= 0 {
		l.RequestsPerSecond = d.RequestsPerSecond
	}
	for _, p := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&l.ReadHeaderTimeout, d.ReadHeaderTimeout}, {&l.ReadTimeout, d.ReadTimeout}, {&l.IdleTimeout, d.IdleTimeout},
		{&l.CallTimeout, d.CallTimeout}, {&l.CloseTimeout, d.CloseTimeout}, {&l.SessionIdleTimeout, d.SessionIdleTimeout}} {
		if *p.v <= 0 {
			*p.v = p.def
		}
	}
	return l
}

// Options describe one turn's bridge.
type Options struct {
	// Catalog is the turn's published catalogue; its ExecutionID names the turn.
	Catalog Catalog
	// Turn is the kernel's turn: every tools/call is decided by it, afresh.
	Turn    *kernel.Turn
	TraceID string
	// Secret signs and verifies the turn's execution tokens.
	Secret []byte
	// Version is reported in serverInfo.
	Version string
	// Instructions are offered to clients at initialize (optional).
	Instructions string
	Limits       Limits
	Logger       *slog.Logger
	Clock        func() time.Time
	// OnEvent, when set, receives every call-log event as it happens.
	OnEvent func(Event)
}

// Server is one turn's MCP bridge.
type Server struct {
	opts       Options
	limits     Limits
	clock      func() time.Time
	logger     *slog.Logger
	mcp        *mcp.Server
	streamable *mcp.StreamableHTTPHandler
	handler    http.Handler
	log        callLog
	expect     map[string]string
	verified   verifiedToken
	limiter    *rate.Limiter
	slots      chan struct{}
	calls      atomic.Int64

	baseCtx     context.Context
	cancelCalls context.CancelFunc
	closed      atomic.Bool
	closeOnce   sync.Once
	mu          sync.Mutex
	httpServers []*http.Server
	initialized atomic.Bool
	listed      atomic.Bool
}

// New builds the bridge for a turn. It serves nothing until Serve is called.
func New(opts Options) (*Server, error) {
	if opts.Turn == nil {
		return nil, errors.New("bridge: a kernel turn is required")
	}
	if len(opts.Secret) < 16 {
		return nil, errors.New("bridge: the token secret must be at least 16 bytes")
	}
	if opts.Catalog.ExecutionID == "" || opts.Catalog.CatalogHash == "" {
		return nil, errors.New("bridge: the catalogue needs an execution id and a hash")
	}
	s := &Server{opts: opts, limits: opts.Limits.withDefaults(), clock: opts.Clock, logger: opts.Logger}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	ac := opts.Turn.Context()
	s.expect = map[string]string{
		"executionId": opts.Catalog.ExecutionID,
		"catalogHash": opts.Catalog.CatalogHash,
		"namespaceId": ac.NamespaceID,
		"actor":       ac.Actor.String(),
	}
	s.log.sink = opts.OnEvent
	s.limiter = rate.NewLimiter(rate.Limit(s.limits.RequestsPerSecond), s.limits.Burst)
	s.slots = make(chan struct{}, s.limits.MaxConcurrent)
	s.baseCtx, s.cancelCalls = context.WithCancel(context.Background())

	version := opts.Version
	if version == "" {
		version = "dev"
	}
	// The SDK narrates every session at info level; only its warnings are ours to show.
	sdkLogger := slog.New(warnOnly{s.logger.Handler()})
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, &mcp.ServerOptions{
		Instructions: opts.Instructions,
		Logger:       sdkLogger,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
		// 2026-07-28 (sessionless) is left out on purpose: the bridge is one stateful
		// session per turn, and clients that probe for it fall back to initialize.
		SupportedProtocolVersions: []string{"2025-11-25", "2025-06-18", "2025-03-26"},
	})
	s.mcp.AddReceivingMiddleware(s.middleware)
	s.streamable = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		JSONResponse:        true,
		Logger:              sdkLogger,
		SessionTimeout:      s.limits.SessionIdleTimeout,
		MaxRequestBodyBytes: s.limits.MaxBodyBytes,
	})
	s.handler = http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.serveGuarded))
	return s, nil
}

// Handler is the bridge's HTTP handler (all hardening included), for callers that
// run their own server; Serve uses it.
func (s *Server) Handler() http.Handler { return s.handler }

// Token mints the turn's execution token, valid until expiresAt.
func (s *Server) Token(expiresAt time.Time) (string, error) {
	return MintToken(Claims{
		ExecutionID: s.expect["executionId"],
		NamespaceID: s.expect["namespaceId"],
		Actor:       s.expect["actor"],
		CatalogHash: s.expect["catalogHash"],
		ExpiresAt:   expiresAt.UTC().Format("2006-01-02T15:04:05.000Z"),
	}, s.opts.Secret)
}

// Serve serves the bridge on a loopback listener until Close. The listener may have
// been created inside another network namespace; only its address is checked.
func (s *Server) Serve(l net.Listener) error {
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		l.Close()
		return fmt.Errorf("bridge: refusing to serve on %s: only loopback TCP addresses are allowed", l.Addr())
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return s.baseCtx },
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		l.Close()
		return errors.New("bridge: closed")
	}
	s.httpServers = append(s.httpServers, hs)
	s.mu.Unlock()
	// The listener may be closed under us by its owner (the sandbox tears down its
	// namespace): that is an end, not a failure.
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge: serving: %w", err)
	}
	return nil
}

// ServeStdio serves the same catalogue over newline-delimited JSON-RPC on r and w
// until the client closes r or ctx ends. Every call is still decided by the kernel;
// no token is asked, since whoever holds the pipes started the process.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()
	d := newStdioDrain(s.limits.CallTimeout)
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: drainReader{r, d}, Writer: drainWriter{w, d}, MaxLineLength: int(s.limits.MaxBodyBytes)})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("bridge: stdio: %w", err)
	}
	return nil
}

// Close ends the turn's bridge: later calls are refused, calls in flight are
// cancelled, MCP sessions are closed, and the port is released. It returns within
// the close timeout even when a client holds a connection open.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		servers := s.httpServers
		s.mu.Unlock()
		s.opts.Turn.Drain()
		s.cancelCalls()
		for ss := range s.mcp.Sessions() {
			ss.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.limits.CloseTimeout)
		defer cancel()
		var wg sync.WaitGroup
		for _, hs := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := hs.Shutdown(ctx); err != nil {
					hs.Close()
				}
			}()
		}
		wg.Wait()
	})
	return nil
}

// Events is the call log so far.
func (s *Server) Events() []Event { return s.log.snapshot() }

// Initialized reports whether a client completed initialize.
func (s *Server) Initialized() bool { return s.initialized.Load() }

// Listed reports whether a client listed the catalogue.
func (s *Server) Listed() bool { return s.listed.Load() }

// middleware is the one receiving middleware: tools/list is answered from the
// published catalogue, every tools/call goes to the kernel, initialize is observed.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			if s.closed.Load() {
				return nil, errors.New("the turn has ended")
			}
			body, err := renderList(s.opts.Catalog)
			if err != nil {
				return nil, err
			}
			s.listed.Store(true)
			s.log.add(Event{Time: s.clock(), Kind: EventList, Detail: fmt.Sprintf("%d tools", len(s.opts.Catalog.Tools))})
			return &rawResult{body: body}, nil
		case "tools/call":
			creq, ok := req.(*mcp.CallToolRequest)
			if !ok || creq.Params == nil {
				return nil, errors.New("tools/call without params")
			}
			return s.call(ctx, creq.Params)
		case "initialize":
			res, err := next(ctx, method, req)
			if err == nil {
				e := Event{Time: s.clock(), Kind: EventInitialize}
				if ir, ok := req.(*mcp.ServerRequest[*mcp.InitializeParams]); ok && ir.Params != nil && ir.Params.ClientInfo != nil {
					e.Client = ir.Params.ClientInfo.Name + "/" + ir.Params.ClientInfo.Version
				}
				s.initialized.Store(true)
				if r, ok := res.(*mcp.InitializeResult); ok {
					e.ProtocolVersion = r.ProtocolVersion
					s.log.add(e)
					return renderInitialize(r)
				}
				s.log.add(e)
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// errCallAborted aborts a tools/call whose client cancelled it or whose turn ended.
var errCallAborted = errors.New("the call was cancelled")

func (s *Server) call(ctx context.Context, p *mcp.CallToolParamsRaw) (mcp.Result, error) {
	name, alias := s.opts.Catalog.ResolveName(p.Name)
	callID := fmt.Sprintf("%s-call-%d", s.opts.Catalog.ExecutionID, s.calls.Add(1))
	callCtx, cancel := context.WithTimeout(ctx, s.limits.CallTimeout)
	defer cancel()
	stop := context.AfterFunc(s.baseCtx, cancel)
	defer stop()
	started := s.clock()
	res := s.opts.Turn.Call(callCtx, kernel.Call{ID: callID, Tool: name, Arguments: p.Arguments, TraceID: s.opts.TraceID, RequestedAt: started})
	n, sum := digest(p.Arguments)
	e := Event{Time: started, Kind: EventCall, CallID: callID, Tool: name, Alias: alias, ArgumentsBytes: n, ArgumentsSHA256: sum, GrantID: res.GrantID}
	if res.Requirement != nil {
		e.Namespace, e.Resource, e.Action = res.Requirement.Resource.Namespace, res.Requirement.Resource.Path, res.Requirement.Action
	} else {
		// Refused before a requirement was derived: record the path the arguments
		// name, for matching and reading (it authorized nothing).
		e.Resource = namedPath(p.Arguments)
	}
	if res.Cancelled {
		if ctx.Err() != nil || s.baseCtx.Err() != nil {
			e.Decision, e.DurationMillis = DecisionCancelled, millis(s.clock().Sub(started))
			s.log.add(e)
			return nil, errCallAborted
		}
		res.Cancelled = false
		res.Message = fmt.Sprintf("the call did not finish within the bridge's %s per-call deadline", s.limits.CallTimeout)
	}
	var tool *PublishedTool
	if t, _, ok := s.opts.Catalog.Lookup(name); ok {
		tool = &t
	}
	body, res, err := renderCall(res, tool, s.limits.MaxResultBytes)
	e.Decision, e.Code, e.Message = string(res.Status), res.Code, res.Message
	e.DurationMillis = millis(s.clock().Sub(started))
	s.log.add(e)
	if err != nil {
		return nil, fmt.Errorf("rendering the result: %w", err)
	}
	return &rawResult{body: body}, nil
}

// warnOnly passes records at warning level and above.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

// namedPath is the "path" argument when it is an array of strings.
func namedPath(args json.RawMessage) []string {
	var a struct {
		Path []string `json:"path"`
	}
	if json.Unmarshal(args, &a) != nil {
		return nil
	}
	return a.Path
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
