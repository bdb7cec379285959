package main

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1073741824": 1 << 30, "512K": 512 << 10, "64M": 64 << 20, "2G": 2 << 30,
		"1.5G": 3 << 29, "64MiB": 64 << 20, "64mb": 64 << 20} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "0", "12Q"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}

func TestExecUsage(t *testing.T) {
	for _, args := range [][]string{
		{"exec"},
		{"exec", "--memory", "lots", "--", "true"},
		{"exec", "--allow-loopback", "70000", "--", "true"},
		{"exec", "--no-such-flag", "--", "true"},
	} {
		r := runCLI(t, "", args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, r.code, exitUsage, r.stderr)
		}
	}
	// Invalid sandbox specs are refused before anything runs.
	r := runCLI(t, "", "exec", "--pass-env", "LD_PRELOAD", "--", "true")
	if r.code != exitSandbox || !strings.Contains(r.stderr, "LD_PRELOAD") {
		t.Errorf("--pass-env LD_PRELOAD: exit %d: %s", r.code, r.stderr)
	}
}

func TestDoctorTakesNoArgs(t *testing.T) {
	if r := runCLI(t, "", "doctor", "extra"); r.code != exitUsage {
		t.Errorf("exit %d", r.code)
	}
}
