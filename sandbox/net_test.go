package sandbox

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// decoy is a host listener that must never see a connection from the sandbox.
type decoy struct {
	hits atomic.Int64
	ls   []net.Listener
	port int
}

func newDecoy(t *testing.T, addrs ...string) *decoy {
	t.Helper()
	d := &decoy{}
	for _, a := range addrs {
		if d.port != 0 {
			a = strings.Replace(a, ":0", fmt.Sprintf(":%d", d.port), 1)
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Logf("decoy on %s: %v", a, err)
			continue
		}
		d.port = l.Addr().(*net.TCPAddr).Port
		d.ls = append(d.ls, l)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				d.hits.Add(1)
				c.Close()
			}
		}()
	}
	t.Cleanup(func() {
		for _, l := range d.ls {
			l.Close()
		}
	})
	return d
}

// hostAddress is a non-loopback address of this machine, if it has one.
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String()
		}
	}
	return ""
}

func TestNetworkDecoysUnreachable(t *testing.T) {
	needTool(t, "curl", "nc", "bash")
	d := newDecoy(t, "127.0.0.1:0", "[::1]:0")
	wide := newDecoy(t, "0.0.0.0:0")
	var attempts []string
	for _, url := range []string{"127.0.0.1", "localhost", "[::1]", "0.0.0.0"} {
		attempts = append(attempts, fmt.Sprintf("curl -s --max-time 2 http://%s:%d/", url, d.port))
	}
	attempts = append(attempts,
		fmt.Sprintf("curl -s --max-time 2 http://0.0.0.0:%d/", wide.port),
		fmt.Sprintf("bash -c 'echo x > /dev/tcp/127.0.0.1/%d'", d.port),
		fmt.Sprintf("nc -z -w 2 127.0.0.1 %d", d.port),
		fmt.Sprintf("nc -z -w 2 ::1 %d", d.port),
		// TEST-NET-1: no route inside, so not even a packet leaves.
		"curl -s --max-time 2 http://192.0.2.1/",
		"nc -z -w 2 192.0.2.1 80",
	)
	if a := hostAddress(); a != "" {
		attempts = append(attempts, fmt.Sprintf("curl -s --max-time 2 http://%s:%d/", a, wide.port))
	}
	var script strings.Builder
	for i, a := range attempts {
		fmt.Fprintf(&script, "if %s >/dev/null 2>&1; then echo 'BREACH %d: %s'; fi\n", a, i, strings.ReplaceAll(a, "'", ""))
	}
	script.WriteString("echo done\n")
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, command: script.String()})
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "BREACH") || !strings.Contains(r.stdout, "done") {
			t.Errorf("inside: %s", r.stdout)
		}
		if n := d.hits.Load() + wide.hits.Load(); n > 0 {
			t.Errorf("BREACH: decoys saw %d connections", n)
		}
		// Every loopback attempt (curl ×5 incl. localhost's two families, /dev/tcp, nc ×2)
		// was refused inside and logged; TEST-NET and the host address fail with no route.
		if n := r.outcome.count(ViolationPortDenied); n < 7 {
			t.Errorf("want ≥7 port-denied violations, got %d: %+v", n, r.outcome.Violations)
		}
	})
}

func TestNetworkNoDNS(t *testing.T) {
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, command: "if getent hosts example.com; then echo BREACH; fi; if getent hosts sharedos.invalid; then echo BREACH; fi; echo done"})
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "BREACH") {
			t.Errorf("a name resolved inside: %s", r.stdout)
		}
	})
}

// modelServer stands for the model endpoint: /big is 64 MiB of a known pattern.
func modelServer(t *testing.T) (port int, bigSum string) {
	t.Helper()
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	sum := sha256.Sum256(big)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			io.Copy(w, bytes.NewReader(big))
			return
		}
		fmt.Fprintf(w, "model-ok %s", r.Host)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port, fmt.Sprintf("%x", sum)
}

func TestEgressProxy(t *testing.T) {
	needTool(t, "curl", "sha256sum")
	port, sum := modelServer(t)
	other := newDecoy(t, "127.0.0.1:0")
	allowed := fmt.Sprintf("127.0.0.1:%d", port)
	flags := []string{"--allow-egress", allowed, "--allow-egress", fmt.Sprintf("localhost:%d", other.port)}
	script := fmt.Sprintf(`
set -u
P="$HTTPS_PROXY"
[ "$HTTP_PROXY" = "$P" ] && [ "$http_proxy" = "$P" ] && [ "$https_proxy" = "$P" ] && [ "$ALL_PROXY" = "$P" ] && [ "$NODE_USE_ENV_PROXY" = 1 ] && echo env-ok
case "$NO_PROXY" in *127.0.0.1*) echo noproxy-ok;; esac
curl -sf --noproxy '' -p -x "$P" http://%[1]s/small && echo
curl -sf --noproxy '' -p -x "$P" http://%[1]s/big -o "$TMPDIR/big" && sha256sum < "$TMPDIR/big" | cut -d' ' -f1
rm -f "$TMPDIR/big"
curl -sf --noproxy '' -x "$P" http://%[1]s/big -o "$TMPDIR/big" && sha256sum < "$TMPDIR/big" | cut -d' ' -f1
# refused: allowed host on another port, a name not allowed, a name resolving to loopback
curl -s -o /dev/null -w 'other-port %%{http_connect}\n' --noproxy '' -p -x "$P" http://127.0.0.1:%[2]d/
curl -s -o /dev/null -w 'bad-name %%{http_connect}\n' --noproxy '' -p -x "$P" https://example.com/
curl -s -o /dev/null -w 'resolves-loopback %%{http_connect}\n' --noproxy '' -p -x "$P" http://localhost:%[2]d/
curl -s -o /dev/null -w 'plain-other %%{http_code}\n' --noproxy '' -x "$P" http://127.0.0.1:%[2]d/
# a client that strips the proxy variables gets nothing
if env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy -u ALL_PROXY -u all_proxy curl -sf --max-time 2 http://%[1]s/small; then echo BREACH-direct; fi
echo done
`, allowed, other.port)
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, flags: flags, command: script})
		expectCode(t, r, 0)
		for _, want := range []string{"env-ok", "noproxy-ok", "model-ok", "other-port 403", "bad-name 403", "resolves-loopback 403", "plain-other 403", "done"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("missing %q in:\n%s\n%s", want, r.stdout, r.stderr)
			}
		}
		if strings.Count(r.stdout, sum) != 2 {
			t.Errorf("64 MiB body did not arrive intact twice (CONNECT and plain): want %s in\n%s", sum, r.stdout)
		}
		if strings.Contains(r.stdout, "BREACH") || other.hits.Load() > 0 {
			t.Errorf("BREACH: %s (decoy hits %d)", r.stdout, other.hits.Load())
		}
		if n := r.outcome.count(ViolationProxyDenied); n != 4 {
			t.Errorf("want 4 egress-denied violations, got %d: %+v", n, r.outcome.Violations)
		}
	})
}

func TestLoopbackMirror(t *testing.T) {
	needTool(t, "curl")
	port, _ := modelServer(t)
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, flags: []string{"--allow-loopback", fmt.Sprint(port)},
			command: fmt.Sprintf("curl -sf http://127.0.0.1:%[1]d/a && echo && curl -sf http://localhost:%[1]d/b", port)})
		expectCode(t, r, 0)
		if strings.Count(r.stdout, "model-ok") != 2 {
			t.Errorf("mirror: %s %s", r.stdout, r.stderr)
		}
	})
}

func TestUnixSocketsUnreachable(t *testing.T) {
	needTool(t, "socat")
	abstract := "@" + marker()
	la, err := net.Listen("unix", abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	dir := runDir(t, nobody)
	path := dir + "/server.sock"
	lp, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer lp.Close()
	var hits atomic.Int64
	for _, l := range []net.Listener{la, lp} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				c.Close()
			}
		}()
	}
	// Sanity: both are reachable from the host.
	for _, a := range []string{abstract, path} {
		c, err := net.Dial("unix", a)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	base := hits.Load()
	script := fmt.Sprintf("if socat -u ABSTRACT-CONNECT:%s - </dev/null; then echo BREACH-abstract; fi; if socat -u UNIX-CONNECT:%s - </dev/null; then echo BREACH-path; fi; echo done", abstract[1:], path)
	asUsers(t, func(t *testing.T, uid int) {
		r := runExec(t, execOpts{uid: uid, command: script})
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "BREACH") || hits.Load() != base {
			t.Errorf("BREACH: %s (hits %d)", r.stdout, hits.Load()-base)
		}
	})
}
