package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// egressProxy is the HTTP proxy the sandbox's clients see through HTTP(S)_PROXY: CONNECT
// for TLS, absolute-form requests for plain HTTP, to the allowlisted host:port pairs
// only. It accepts inside the network namespace and dials from the launcher's.
type egressProxy struct {
	policy *egressPolicy
	viol   *violationLog
	log    *slog.Logger
	conns  *connSet
	dialer net.Dialer
}

const proxyHeaderTimeout = 30 * time.Second

func (p *egressProxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(proxyHeaderTimeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.connect(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

func (p *egressProxy) deny(c net.Conn, req *http.Request, target string, why error) {
	p.viol.add(ViolationProxyDenied, fmt.Sprintf("%s %s: %v", req.Method, target, why))
	p.log.Info("egress refused", "method", req.Method, "target", target, "reason", why)
	body := "sharedos-run sandbox: egress refused: " + why.Error() + "\n"
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func (p *egressProxy) dial(req *http.Request, target string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(req.Context(), 30*time.Second)
	defer cancel()
	addr, err := p.policy.resolve(ctx, target)
	if err != nil {
		return nil, err
	}
	up, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return up, nil
}

func (p *egressProxy) connect(c net.Conn, br *bufio.Reader, req *http.Request) {
	target := req.RequestURI
	up, err := p.dial(req, target)
	if err != nil {
		p.deny(c, req, target, err)
		return
	}
	if !p.conns.add(up) {
		return
	}
	defer p.conns.drop(up)
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	// Bytes the client sent right after the CONNECT line (a TLS hello) are in br.
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	splice(c, up)
}

// forward relays one absolute-form plain-HTTP request; false ends the connection.
func (p *egressProxy) forward(c net.Conn, req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		p.deny(c, req, req.RequestURI, fmt.Errorf("only CONNECT and absolute http:// requests are proxied"))
		return false
	}
	target := req.URL.Host
	if req.URL.Port() == "" {
		target = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	// The Host header must name the same place as the URL, or a server behind an
	// allowed address could be asked for another virtual host.
	if req.Host != "" && !strings.EqualFold(req.Host, req.URL.Host) {
		p.deny(c, req, target, fmt.Errorf("Host header %q differs from the request's %q", req.Host, req.URL.Host))
		return false
	}
	up, err := p.dial(req, target)
	if err != nil {
		p.deny(c, req, target, err)
		return false
	}
	if !p.conns.add(up) {
		return false
	}
	defer p.conns.drop(up)
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	keep := !req.Close
	req.Close = true // one upstream connection per request keeps the relay simple
	if err := req.Write(up); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	resp.Close = !keep
	if err := resp.Write(c); err != nil {
		return false
	}
	return keep
}
