package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Compiled on first use, not at start: the binary starts twice per run (launcher, stub).
var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// loaderVars change what every program loads; the caller's are never passed on.
func isLoaderVar(name string) bool {
	return strings.HasPrefix(name, "LD_") || name == "GCONV_PATH" || name == "GLIBC_TUNABLES"
}

func checkPassEnv(name string) error {
	if !envName().MatchString(name) {
		return fmt.Errorf("--pass-env %q: not a variable name", name)
	}
	if isLoaderVar(name) {
		return fmt.Errorf("--pass-env %s: loader variables are never passed into the sandbox", name)
	}
	return nil
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildEnv builds the command's environment from nothing: PATH, the locale, the private
// HOME/TMPDIR/XDG dirs, TERM on a pty, the spec's variables, the named pass-through
// variables, the caller's late additions, and last the proxy variables.
func buildEnv(s *Spec, sc *scratch, proxyURL string, extra []string) []string {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	set("PATH", path)
	set("HOME", sc.home)
	set("TMPDIR", sc.tmp)
	set("XDG_CONFIG_HOME", filepath.Join(sc.home, ".config"))
	set("XDG_CACHE_HOME", filepath.Join(sc.home, ".cache"))
	set("XDG_DATA_HOME", filepath.Join(sc.home, ".local", "share"))
	set("XDG_STATE_HOME", filepath.Join(sc.home, ".local", "state"))
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") {
			set(k, v)
		}
	}
	if s.TTY {
		term := os.Getenv("TERM")
		if term == "" || term == "dumb" {
			term = "xterm-256color"
		}
		set("TERM", term)
	}
	for _, kv := range append(append([]string{}, s.Env...), extra...) {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, k := range s.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			set(k, v)
		}
	}
	for _, kv := range proxyEnv(proxyURL) {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}

// proxyEnv points every client convention at the CONNECT proxy; loopback stays direct
// (the mirrors and the caller's listeners live there).
func proxyEnv(proxyURL string) []string {
	if proxyURL == "" {
		return nil
	}
	const noProxy = "localhost,127.0.0.1,::1"
	var out []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		out = append(out, k+"="+proxyURL, strings.ToLower(k)+"="+proxyURL)
	}
	return append(out, "NO_PROXY="+noProxy, "no_proxy="+noProxy, "NODE_USE_ENV_PROXY=1")
}
