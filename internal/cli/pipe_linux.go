package cli

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// widenPipe asks for a heldBack-byte pipe when out is one (as when a
// program reads the context): with the default 64 KiB, writing a context
// of a few MB waits for the reader every 64 KiB. Best effort: a pipe stays
// as it is when the system refuses (fs.pipe-max-size).
func widenPipe(out io.Writer) {
	f, ok := out.(*os.File)
	if !ok {
		return
	}
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeNamedPipe != 0 {
		unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, heldBack)
	}
}
