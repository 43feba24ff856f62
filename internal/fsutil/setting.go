package fsutil

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// SettingMax bounds a file a setting names: keys, certificates (a CA
// bundle too) and secrets are a few KiB.
const SettingMax = 1 << 20

// ReadSetting reads a file that a setting names (a key, a certificate, a
// secret), of at most max bytes. A named pipe is opened without waiting for
// a writer: one with no writer is an error at once, where a plain open
// waits for ever (and a daemon starting, with it, deaf to SIGTERM), and one
// whose writer is there (`<(pass show hub-seed)`) reads as a file would. A
// device such as /dev/zero stops at max instead of filling memory.
func ReadSetting(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a folder, not a file", path)
	}
	pipe := st.Mode()&fs.ModeNamedPipe != 0
	if pipe {
		// Blocking from here on: a writer that has not written yet is
		// waited for (a pipe is not in the poller on every system).
		if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	switch {
	case int64(len(b)) > max:
		return nil, fmt.Errorf("%s holds more than %d bytes: not the kind of file this setting names", path, max)
	case pipe && len(b) == 0:
		return nil, fmt.Errorf("%s is a named pipe that nothing writes to", path)
	}
	return b, nil
}
