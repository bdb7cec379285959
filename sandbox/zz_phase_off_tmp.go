//go:build !phases

package sandbox

// TEMPORARY instrumentation (removed before handing in).
func Phase(string) {}
