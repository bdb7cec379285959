package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sharedos/sharedos-run/harnessspec"
)

// DefaultPrefixEnv names the variable that points at the pinned harness prefix.
const DefaultPrefixEnv = "SHAREDOS_HARNESS_PREFIX"

// HarnessPrefixes are the install prefixes searched for pinned harnesses, in order:
// $SHAREDOS_HARNESS_PREFIX, the .harnesses directory beside the binary's bin/
// directory (a checkout's bin/sharedos-run), and ./.harnesses.
func HarnessPrefixes() []string {
	var out []string
	if p := os.Getenv(DefaultPrefixEnv); p != "" {
		out = append(out, p)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			out = append(out, filepath.Join(filepath.Dir(filepath.Dir(real)), ".harnesses"))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		out = append(out, filepath.Join(wd, ".harnesses"))
	}
	seen := map[string]bool{}
	uniq := out[:0]
	for _, p := range out {
		if !seen[p] {
			seen[p] = true
			uniq = append(uniq, p)
		}
	}
	return uniq
}

// Installed is a harness found on this machine.
type Installed struct {
	Executable string
	Prefix     string // the pinned prefix it came from ("" when found on PATH)
	Version    string
}

// NotAvailableError says why a harness cannot run here.
type NotAvailableError struct {
	Harness string
	Reason  string
}

func (e *NotAvailableError) Error() string {
	return fmt.Sprintf("%s is not available: %s", e.Harness, e.Reason)
}

// Probe finds the harness (pinned prefixes first, then PATH) and asks its version,
// within the spec's timeout. A harness that is missing, hangs or answers nonsense is
// not available, with the reason.
func Probe(ctx context.Context, spec harnessspec.Spec, prefixes []string) (Installed, error) {
	var found Installed
	for _, prefix := range prefixes {
		for _, name := range spec.Probe.Executables {
			p := filepath.Join(prefix, "node_modules", ".bin", name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				abs, _ := filepath.Abs(prefix)
				found = Installed{Executable: p, Prefix: abs}
				break
			}
		}
		if found.Executable != "" {
			break
		}
	}
	if found.Executable == "" {
		for _, name := range spec.Probe.Executables {
			if p, err := exec.LookPath(name); err == nil {
				found = Installed{Executable: p}
				break
			}
		}
	}
	if found.Executable == "" {
		where := "on PATH"
		if len(prefixes) > 0 {
			where = "in " + strings.Join(prefixes, ", ") + " or on PATH"
		}
		reason := fmt.Sprintf("no %s executable %s", strings.Join(spec.Probe.Executables, "/"), where)
		if spec.Probe.InstallHint != "" {
			reason += "; " + spec.Probe.InstallHint
		}
		return Installed{}, &NotAvailableError{Harness: spec.ID, Reason: reason}
	}
	timeout := spec.Probe.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, found.Executable, spec.Probe.VersionArgs...)
	cmd.Env = probeEnv(spec, found.Prefix)
	cmd.Stdin = nil
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return Installed{}, &NotAvailableError{Harness: spec.ID, Reason: fmt.Sprintf("%s %s did not answer within %s", found.Executable, strings.Join(spec.Probe.VersionArgs, " "), timeout)}
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Installed{}, &NotAvailableError{Harness: spec.ID, Reason: fmt.Sprintf("running %s: %v", found.Executable, err)}
		}
	}
	v, perr := spec.Probe.ParseVersion(stdout.String(), stderr.String())
	if perr != nil {
		return Installed{}, &NotAvailableError{Harness: spec.ID, Reason: fmt.Sprintf("%s %s: %v", found.Executable, strings.Join(spec.Probe.VersionArgs, " "), perr)}
	}
	found.Version = v
	return found, nil
}

// probeEnv is a minimal environment for the version call, with the spec's prefix
// directories first on PATH.
func probeEnv(spec harnessspec.Spec, prefix string) []string {
	path := os.Getenv("PATH")
	if prefix != "" {
		var dirs []string
		for _, d := range spec.Probe.PrefixPath {
			dirs = append(dirs, filepath.Join(prefix, d))
		}
		if len(dirs) > 0 {
			path = strings.Join(dirs, ":") + ":" + path
		}
	}
	env := []string{"PATH=" + path, "HOME=" + os.TempDir(), "LANG=C.UTF-8"}
	return env
}
