//go:build !unix

package files

import "os"

// readFlags: platforms without O_NONBLOCK open plainly.
const readFlags = os.O_RDONLY
