//go:build unix

package files

import (
	"os"
	"syscall"
)

// readFlags opens without blocking so that a FIFO planted in the workspace cannot
// hang a read until some writer appears; regular files ignore the flag.
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK
