package launcher

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos-run/harnessspec"
	"github.com/sharedos/sharedos-run/sandbox"
	"github.com/sharedos/sharedos-run/scriptedmodel"
)

// providerHost is where the stand-in provider listens: host loopback, but not
// 127.0.0.1. The sandbox sets NO_PROXY=localhost,127.0.0.1,::1 (and a test cannot
// override the proxy variables), so a harness told https://127.0.0.1:PORT connects
// directly — inside the network namespace nobody serves that port, the connection is
// refused, and the CONNECT proxy is never asked. 127.0.0.2 is loopback on the host
// (the scripted model server accepts it), outside NO_PROXY, and an IP literal the
// allowlist may name explicitly.
const providerHost = "127.0.0.2"

// providerKeyEnv carries the stand-in provider's key into the sandbox (--pass-env).
const providerKeyEnv = "SHAREDOS_TEST_MODEL_KEY"

// testCA is a throwaway certificate authority and a server certificate it signed
// for the loopback addresses.
type testCA struct {
	pemFile string // the CA certificate, PEM, under /var/tmp (the sandbox hides /tmp)
	server  tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sharedos-run test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "sharedos-run test provider"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(providerHost)},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp("/var/tmp", "sharedos-test-ca-*.pem")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if err := pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The harness runs as root in the sandbox, but keep the file readable anyway.
	os.Chmod(f.Name(), 0o644)
	return testCA{
		pemFile: f.Name(),
		server:  tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey},
	}
}

// startTLSProvider serves the scripted model over TLS on providerHost, standing in
// for a live provider. It returns the server (for its request log) and the port.
func startTLSProvider(t *testing.T, ca testCA, script scriptedmodel.Script, modelID string) (*scriptedmodel.Server, int) {
	t.Helper()
	srv, err := scriptedmodel.New(scriptedmodel.Options{Script: script, ModelID: modelID})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(providerHost, "0"))
	if err != nil {
		t.Skipf("cannot listen on %s (loopback beyond 127.0.0.1 unavailable): %v", providerHost, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(tl) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("TLS provider: %v", err)
		}
	})
	return srv, port
}

type liveCase struct {
	name     string
	harness  string
	modelID  string
	provider string
	// caEnv are the variables that point the harness's TLS stack at the test CA.
	caEnv func(file string) []string
}

func liveCases() []liveCase {
	return []liveCase{
		// Claude Code (Bun) trusts NODE_EXTRA_CA_CERTS on top of its own roots.
		{name: "claude-code", harness: "claude-code", modelID: "claude-sonnet-4-5", provider: "anthropic",
			caEnv: func(f string) []string { return []string{"NODE_EXTRA_CA_CERTS=" + f} }},
		// Codex (reqwest + rustls) reads CODEX_CA_CERTIFICATE, falling back to
		// SSL_CERT_FILE; either replaces the system roots.
		{name: "codex", harness: "codex", modelID: "scripted-model", provider: "openai",
			caEnv: func(f string) []string { return []string{"CODEX_CA_CERTIFICATE=" + f, "SSL_CERT_FILE=" + f} }},
	}
}

// runLiveTurn runs one turn whose model seat is a live provider at
// https://providerHost:port, reachable (or not) through the sandbox's CONNECT proxy
// as allowEgress says.
func runLiveTurn(t *testing.T, c liveCase, ca testCA, port int, allowEgress []string) *Record {
	t.Helper()
	spec, _ := harnessspec.ByID(c.harness)
	cfg, _ := e2eWorld(t, c.harness)
	t.Setenv(providerKeyEnv, "sk-sharedos-test-not-a-real-key")
	start := time.Now()
	rec, err := RunTurn(context.Background(), TurnRequest{
		Spec: spec, Config: cfg, Prompt: "Do the scripted steps.",
		Model: ModelSeat{
			ID: c.modelID, Provider: c.provider,
			BaseURL: fmt.Sprintf("https://%s", net.JoinHostPort(providerHost, fmt.Sprint(port))),
			KeyEnv:  providerKeyEnv,
		},
		Sandbox: sandbox.Spec{
			Timeout: 120 * time.Second, Grace: 5 * time.Second,
			PassEnv:     []string{providerKeyEnv},
			AllowEgress: allowEgress,
			Env:         c.caEnv(ca.pemFile),
		},
		Prefixes: repoPrefixes(), Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("turn took %v (status %s)", time.Since(start).Round(time.Millisecond), rec.Execution.Status)
	if t.Failed() || testing.Verbose() {
		b, _ := json.MarshalIndent(rec, "", "  ")
		t.Logf("record: %s", b)
	}
	return rec
}

// TestLiveProviderThroughConnectProxy: a TLS server on host loopback stands in for a
// model provider; the harness trusts it through the CA variables, reaches it only
// through the sandbox's CONNECT proxy (the allowlist names its address explicitly),
// and the scripted model behind it reads a granted file through the bridge.
func TestLiveProviderThroughConnectProxy(t *testing.T) {
	script := scriptedmodel.Script{
		Steps: []scriptedmodel.Step{{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)}},
		Final: "read it over TLS",
	}
	for _, c := range liveCases() {
		t.Run(c.name, func(t *testing.T) {
			spec, _ := harnessspec.ByID(c.harness)
			needHarness(t, spec)
			ca := newTestCA(t)
			model, port := startTLSProvider(t, ca, script, c.modelID)
			target := net.JoinHostPort(providerHost, fmt.Sprint(port))
			rec := runLiveTurn(t, c, ca, port, []string{target})

			if rec.Execution.Status != StatusSucceeded {
				t.Fatalf("status %s: %s (errors %v)", rec.Execution.Status, rec.Execution.Reason, rec.Execution.Errors)
			}
			var got []string
			for _, op := range rec.Execution.Operations {
				got = append(got, op.Tool+":"+op.Outcome+":"+strings.Join(op.Resource, "/"))
			}
			if len(got) != 1 || got[0] != "files.read:succeeded:README.md" {
				t.Fatalf("operations %v, want one files.read of README.md through the bridge", got)
			}
			if !rec.Execution.Bridge.Initialized || !rec.Execution.Bridge.Listed {
				t.Fatalf("bridge: %+v", rec.Execution.Bridge)
			}
			turns := 0
			for _, q := range model.Requests() {
				if q.Step >= 0 {
					turns++
				}
			}
			if turns < 2 {
				t.Fatalf("the TLS provider saw %d model turns, want the tool call and the final text: %+v", turns, model.Requests())
			}
			if !strings.Contains(rec.Execution.OutputText, "read it over TLS") {
				t.Errorf("output %q lacks the scripted final text", rec.Execution.OutputText)
			}
			if rec.Sandbox.Network.Mode != "bridge+egress-proxy" {
				t.Errorf("network mode %q, want bridge+egress-proxy", rec.Sandbox.Network.Mode)
			}
			// A clean run reaches the provider and nothing else. (Codex 0.171's OTel
			// metrics exporter tries ab.chatgpt.com:443 as soon as a proxy exists
			// unless the launch sets -c analytics.enabled=false.)
			if len(rec.Sandbox.Violations) != 0 {
				t.Fatalf("violations in a clean run (the harness tried to reach more than its provider): %+v", rec.Sandbox.Violations)
			}
			if rec.Model.Scripted || rec.Identity.Provider != c.provider {
				t.Errorf("model seat recorded as %+v / provider %q, want a live %s seat", rec.Model, rec.Identity.Provider, c.provider)
			}
		})
	}
}

// TestDisallowedProviderHostRefusedAndLogged: the same provider, but the allowlist
// names another port: the proxy refuses the CONNECT, the refusal is in the record's
// violation log naming the target, the turn does not succeed, and the provider never
// sees a request.
func TestDisallowedProviderHostRefusedAndLogged(t *testing.T) {
	script := scriptedmodel.Script{
		Steps: []scriptedmodel.Step{{Tool: "files.read", Arguments: json.RawMessage(`{"path":["README.md"]}`)}},
		Final: "should never be said",
	}
	for _, c := range liveCases() {
		t.Run(c.name, func(t *testing.T) {
			spec, _ := harnessspec.ByID(c.harness)
			needHarness(t, spec)
			ca := newTestCA(t)
			model, port := startTLSProvider(t, ca, script, c.modelID)
			target := net.JoinHostPort(providerHost, fmt.Sprint(port))
			other := port + 1
			if other > 65535 {
				other = port - 1
			}
			rec := runLiveTurn(t, c, ca, port, []string{net.JoinHostPort(providerHost, fmt.Sprint(other))})

			if rec.Execution.Status == StatusSucceeded {
				t.Fatalf("the turn succeeded without its provider: %+v", rec.Execution)
			}
			if n := len(model.Requests()); n != 0 {
				t.Fatalf("the provider saw %d requests through a refused CONNECT: %+v", n, model.Requests())
			}
			if len(rec.Execution.Operations) != 0 {
				t.Errorf("operations without a model: %+v", rec.Execution.Operations)
			}
			denied := false
			for _, v := range rec.Sandbox.Violations {
				if v.Kind == sandbox.ViolationProxyDenied && strings.Contains(v.Detail, target) {
					denied = true
				}
			}
			if !denied {
				t.Fatalf("no %s violation naming %s: %+v", sandbox.ViolationProxyDenied, target, rec.Sandbox.Violations)
			}
			if rec.Sandbox.Network.Mode != "bridge+egress-proxy" {
				t.Errorf("network mode %q, want bridge+egress-proxy", rec.Sandbox.Network.Mode)
			}
		})
	}
}
