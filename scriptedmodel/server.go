package scriptedmodel

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// API names in the request log.
const (
	APIAnthropic   = "anthropic-messages"
	APICountTokens = "anthropic-count-tokens"
	APIResponses   = "openai-responses"
	APIChat        = "openai-chat-completions"
	APIModels      = "models"
	APIUnknown     = "unknown"
)

// Reply kinds in the request log.
const (
	ReplyToolCall    = "tool_call"
	ReplyFinal       = "final"
	ReplySideText    = "side_text"
	ReplyCountTokens = "count_tokens"
	ReplyModels      = "models"
	ReplyProbe       = "probe" // HEAD
	ReplyError       = "error"
)

// SideText answers a request that offers no tools at all. It is distinctive on
// purpose: should it ever end a turn, the record says why.
const SideText = "scripted model: no tools were offered"

const (
	// DefaultServerName is the MCP server name the harnesses know the bridge by.
	DefaultServerName = "sharedos"
	// DefaultModelID is the model GET /v1/models lists.
	DefaultModelID = "scripted"
	// maxBody bounds a request body. Real requests are well under 1 MiB (Codex code
	// mode's, the largest seen, is ~110 KB with two turns).
	maxBody = 32 << 20
	// maxResultText bounds each tool result kept in the request log.
	maxResultText = 2 << 10
)

// Options configure a server.
type Options struct {
	// Script is what the model does; it is validated by New.
	Script Script
	// ServerName is the bridge's MCP server name in harness-facing tool names
	// (mcp__<server>__…, <server>_…); default DefaultServerName.
	ServerName string
	// ModelID is listed by GET /v1/models; default DefaultModelID.
	ModelID string
	// Logger receives one debug line per request (default: discard).
	Logger *slog.Logger
	// OnRequest, when set, receives every request's log entry, synchronously and
	// before the reply is sent (so it must be quick); calls may be concurrent.
	OnRequest func(RequestLog)
}

// RequestLog is what the server records about one request.
type RequestLog struct {
	Time   time.Time `json:"time"`
	API    string    `json:"api"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Status int       `json:"status"`
	Model  string    `json:"model,omitempty"`
	Stream bool      `json:"stream"`
	// OfferedTools are the tools the request offered the model, harness-facing names;
	// a Responses namespace is joined with "__" (mcp__sharedos + echo →
	// mcp__sharedos__echo), the default namespace "functions" is left out.
	OfferedTools []string `json:"offeredTools"`
	// Step is the step index chosen (the number of tool results seen); -1 when the
	// request is not a model turn.
	Step int `json:"step"`
	// StepTool is the script's name for the step's tool; Local marks a local step.
	StepTool string `json:"stepTool,omitempty"`
	Local    bool   `json:"local,omitempty"`
	// EmittedTool is the harness-facing name the model called (and Namespace its
	// Responses namespace), Via how it was found, Offered whether the request
	// offered it (directly or through a proxy/code-mode route).
	EmittedTool string `json:"emittedTool,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Via         string `json:"via,omitempty"`
	Offered     bool   `json:"offered"`
	// ToolResults are the tool results in the conversation, in order, each text cut
	// to 2 KiB.
	ToolResults []string `json:"toolResults,omitempty"`
	Reply       string   `json:"reply"`
	Error       string   `json:"error,omitempty"`
}

// Server is one scripted model endpoint. It is safe for concurrent requests.
type Server struct {
	script    Script
	server    string
	modelID   string
	logger    *slog.Logger
	onRequest func(RequestLog)

	mu      sync.Mutex
	log     []RequestLog
	servers []*http.Server
	url     string
	closed  bool
}

// New builds a server for a script. It serves nothing until Serve is called.
func New(opts Options) (*Server, error) {
	sc := opts.Script
	sc.Steps = append([]Step(nil), sc.Steps...) // Validate normalises in place: not the caller's slice
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	s := &Server{script: sc, server: opts.ServerName, modelID: opts.ModelID, logger: opts.Logger, onRequest: opts.OnRequest}
	if s.server == "" {
		s.server = DefaultServerName
	}
	if s.modelID == "" {
		s.modelID = DefaultModelID
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Serve answers requests on l until Close. Only loopback TCP listeners are accepted:
// the model seat lives on host loopback and reaches the sandbox through a mirror.
// Serve may be called for several listeners; URL names the first.
func (s *Server) Serve(l net.Listener) error {
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		l.Close()
		return fmt.Errorf("scriptedmodel: refusing to serve on %s: only loopback TCP addresses are allowed", l.Addr())
	}
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return errors.New("scriptedmodel: closed")
	}
	s.servers = append(s.servers, hs)
	if s.url == "" {
		s.url = "http://" + addr.String()
	}
	s.mu.Unlock()
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("scriptedmodel: serving: %w", err)
	}
	return nil
}

// URL is the base URL of the first listener given to Serve ("" before Serve is
// called), without the /v1 suffix: Claude Code's ANTHROPIC_BASE_URL takes it as is;
// Codex and Pi take URL()+"/v1".
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops serving and releases the ports. Requests in flight get a second to
// finish; replies are written in one piece, so that is plenty.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, hs := range servers {
		wg.Go(func() {
			if err := hs.Shutdown(ctx); err != nil {
				hs.Close()
			}
		})
	}
	wg.Wait()
	return nil
}

// Requests is a copy of the request log so far.
func (s *Server) Requests() []RequestLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RequestLog(nil), s.log...)
}

// record logs a request. It runs before the reply is written, so a client that has
// its reply can already see the entry in Requests.
func (s *Server) record(e RequestLog) {
	s.mu.Lock()
	s.log = append(s.log, e)
	s.mu.Unlock()
	level := slog.LevelDebug
	if e.Status >= 400 {
		level = slog.LevelWarn // a harness the model server cannot understand is worth seeing
	}
	s.logger.Log(context.Background(), level, "scripted model request", "api", e.API, "path", e.Path, "status", e.Status, "step", e.Step,
		"tool", e.EmittedTool, "via", e.Via, "offered", e.Offered, "reply", e.Reply, "error", e.Error)
	if s.onRequest != nil {
		s.onRequest(e)
	}
}

// ServeHTTP routes by path suffix, ignoring the query (Claude Code adds ?beta=true)
// and any prefix a base URL adds before /v1.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := RequestLog{Time: time.Now().UTC(), Method: r.Method, Path: r.URL.Path, Step: -1, OfferedTools: []string{}}
	if r.URL.RawQuery != "" {
		e.Path += "?" + r.URL.RawQuery
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	var api, method string
	switch {
	case strings.HasSuffix(p, "/v1/messages/count_tokens"):
		api, method = APICountTokens, http.MethodPost
	case strings.HasSuffix(p, "/v1/messages"):
		api, method = APIAnthropic, http.MethodPost
	case strings.HasSuffix(p, "/v1/responses"):
		api, method = APIResponses, http.MethodPost
	case strings.HasSuffix(p, "/v1/chat/completions"):
		api, method = APIChat, http.MethodPost
	case strings.HasSuffix(p, "/v1/models") || strings.Contains(p, "/v1/models/"):
		api, method = APIModels, http.MethodGet
	default:
		api = APIUnknown
	}
	e.API = api
	// HEAD is a connectivity probe some clients make; it gets an empty 200 anywhere.
	if r.Method == http.MethodHead {
		e.Status, e.Reply = http.StatusOK, ReplyProbe
		s.record(e)
		w.WriteHeader(http.StatusOK)
		return
	}
	fail := func(status int, msg string) {
		e.Status, e.Reply, e.Error = status, ReplyError, msg
		s.record(e)
		writeError(w, api, status, msg)
	}
	if api == APIUnknown {
		fail(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		fail(http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method))
		return
	}
	if api == APIModels {
		body := s.models(r)
		e.Status, e.Reply = http.StatusOK, ReplyModels
		s.record(e)
		w.Header().Set("Content-Type", contentJSON)
		w.Write(body)
		return
	}
	body, status, err := readBody(w, r)
	if err != nil {
		fail(status, err.Error())
		return
	}
	var rep reply
	switch api {
	case APICountTokens:
		rep, err = countTokens(body)
	case APIAnthropic:
		rep, err = s.anthropic(body, &e)
	case APIResponses:
		rep, err = s.responses(body, &e)
	case APIChat:
		rep, err = s.chat(body, &e)
	}
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	e.Status = http.StatusOK
	if e.Reply == "" {
		e.Reply = rep.kind
	}
	h := w.Header()
	h.Set("Content-Type", rep.contentType)
	h.Set("Content-Length", fmt.Sprint(len(rep.body)))
	if rep.contentType == contentSSE {
		h.Set("Cache-Control", "no-cache")
	}
	h.Set("request-id", "req_"+newID())
	s.record(e)
	w.WriteHeader(http.StatusOK)
	w.Write(rep.body)
}

// reply is a whole response body. Replies are built in full before they are sent:
// a scripted model has nothing to wait for, and a complete body makes every event
// sequence the same on every run.
type reply struct {
	kind        string
	contentType string
	body        []byte
}

const (
	contentJSON = "application/json"
	contentSSE  = "text/event-stream"
)

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	var rd io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("bad gzip body: %w", err)
		}
		rd = zr
	case "deflate": // HTTP's deflate is zlib-wrapped (RFC 9110)
		zr, err := zlib.NewReader(rd)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("bad deflate body: %w", err)
		}
		rd = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	// The decompressed size is bounded too: a small compressed body may expand.
	body, err := io.ReadAll(io.LimitReader(rd, maxBody+1))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, http.StatusRequestEntityTooLarge, errors.New("request body too large")
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
	}
	if len(body) > maxBody {
		return nil, http.StatusRequestEntityTooLarge, errors.New("request body too large")
	}
	return body, 0, nil
}

// decodeObject decodes a request body that must be one JSON object.
func decodeObject(body []byte, v any) error {
	var probe json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return fmt.Errorf("bad JSON: %w", err)
	}
	if probe = bytes.TrimSpace(probe); len(probe) == 0 || probe[0] != '{' {
		return errors.New("the body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	return nil
}

// turn is what every API's request boils down to.
type turn struct {
	model   string
	stream  bool
	offered []offeredTool
	results []string
}

// decision is the model's move for a turn.
type decision struct {
	kind string // ReplyToolCall, ReplyFinal or ReplySideText
	call call   // for ReplyToolCall
	text string // for ReplyFinal and ReplySideText
}

// decide picks the move and fills the request log's model fields.
func (s *Server) decide(t turn, e *RequestLog) decision {
	e.Model, e.Stream = t.model, t.stream
	for _, o := range t.offered {
		e.OfferedTools = append(e.OfferedTools, o.display())
	}
	for _, r := range t.results {
		e.ToolResults = append(e.ToolResults, truncate(r, maxResultText))
	}
	e.Step = len(t.results)
	if e.Step >= len(s.script.Steps) {
		e.Reply = ReplyFinal
		return decision{kind: ReplyFinal, text: s.script.Final}
	}
	if len(t.offered) == 0 {
		e.Reply = ReplySideText
		return decision{kind: ReplySideText, text: SideText}
	}
	st := s.script.Steps[e.Step]
	c := resolve(st, t.offered, s.server)
	e.StepTool, e.Local = st.Tool, st.Local
	e.EmittedTool, e.Namespace, e.Via, e.Offered = c.Name, c.Namespace, c.Via, c.Offered
	e.Reply = ReplyToolCall
	return decision{kind: ReplyToolCall, call: c}
}

func (s *Server) models(r *http.Request) []byte {
	m := map[string]any{
		// Both dialects in one object: OpenAI's (object, owned_by) and Anthropic's
		// (type, display_name, created_at).
		"id": s.modelID, "object": "model", "created": 0, "owned_by": "sharedos",
		"type": "model", "display_name": s.modelID, "created_at": "1970-01-01T00:00:00Z",
	}
	var body []byte
	if strings.Contains(r.URL.Path, "/v1/models/") {
		body, _ = json.Marshal(m)
	} else {
		body, _ = json.Marshal(map[string]any{"object": "list", "data": []any{m},
			"has_more": false, "first_id": s.modelID, "last_id": s.modelID})
	}
	return body
}

func countTokens(body []byte) (reply, error) {
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := decodeObject(body, &req); err != nil {
		return reply{}, err
	}
	out, _ := json.Marshal(map[string]int{"input_tokens": estimateTokens(len(body))})
	return reply{kind: ReplyCountTokens, contentType: contentJSON, body: out}, nil
}

// writeError answers in the error shape of the API the client speaks, so its SDK
// surfaces the message instead of a parse failure.
func writeError(w http.ResponseWriter, api string, status int, msg string) {
	typ := "invalid_request_error"
	switch status {
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	}
	var body []byte
	if api == APIAnthropic || api == APICountTokens {
		body, _ = json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	} else {
		body, _ = json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	}
	w.Header().Set("Content-Type", contentJSON)
	w.WriteHeader(status)
	w.Write(body)
}

// sseEvent is one server-sent event; an empty name sends data only (Chat
// Completions), and a string data is sent raw ([DONE]).
type sseEvent struct {
	name string
	data any
}

func encodeSSE(events []sseEvent) []byte {
	var b strings.Builder
	for _, ev := range events {
		if ev.name != "" {
			b.WriteString("event: " + ev.name + "\n")
		}
		var data string
		if s, ok := ev.data.(string); ok {
			data = s
		} else {
			raw, _ := json.Marshal(ev.data)
			data = string(raw)
		}
		b.WriteString("data: " + data + "\n\n")
	}
	return []byte(b.String())
}

// newID is a random identifier suffix; ids only need to be unique within a turn.
func newID() string { return strings.ToLower(rand.Text()[:20]) }

// estimateTokens is a rough count (4 bytes a token) so harnesses that report usage
// report something plausible.
func estimateTokens(n int) int { return max(1, n/4) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
