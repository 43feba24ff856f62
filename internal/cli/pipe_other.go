//go:build !linux

package cli

import "io"

// widenPipe leaves out as it is: only Linux lets a process set a pipe's
// size (F_SETPIPE_SZ); elsewhere a pipe keeps the system's.
func widenPipe(io.Writer) {}
