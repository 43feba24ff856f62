package embedded

import (
	"fmt"
	"log/slog"
	"os"
)

// privateStateDir makes the state dir 0700, or makes an existing one the
// user's alone: one made before pisyncd (mkdir under a umask of 022 or 002,
// a folder a tool created) keeps its mode, and the control socket, bound
// with the process's umask before it is chmod'ed 0600, could be reached by
// another user in between (under a umask of 000 an attacker looping on
// connect reached it at the first restart, and read the web view's token
// from /web). Everything pisyncd keeps there is the user's, so the folder
// is closed rather than each file being relied on.
func privateStateDir(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	was := st.Mode().Perm()
	if was&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("state dir %s is open to other users (mode %#o) and could not be made 0700: %w; use a folder of your own", dir, was, err)
	}
	logger.Warn("the state dir was open to other users: made 0700 (it holds the store, the control socket and the tokens)", "dir", dir, "was", fmt.Sprintf("%#o", was))
	return nil
}
