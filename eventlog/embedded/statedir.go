package embedded

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
)

// privateStateDir makes the state dir 0700, or makes an existing one the
// user's alone: one made before pisyncd (mkdir under a umask of 022 or 002,
// a folder a tool created) keeps its mode, and the control socket, bound
// with the process's umask before it is chmod'ed 0600, could be reached by
// another user in between (under a umask of 000 an attacker looping on
// connect reached it at the first restart, and read the web view's token
// from /web). Everything pisyncd keeps there is the user's, so the folder
// is closed rather than each file being relied on, and a folder holding a
// file of another user is refused.
func privateStateDir(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if was := st.Mode().Perm(); was&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("state dir %s is open to other users (mode %#o) and could not be made 0700: %w; use a folder of your own", dir, was, err)
		}
		logger.Warn("the state dir was open to other users: made 0700 (it holds the store, the control socket and the tokens)", "dir", dir, "was", fmt.Sprintf("%#o", was))
	}
	// While it was open (now, or under an earlier version, which left its
	// mode as it found it), another user could put files in it for pisyncd
	// to take as its own: a web-token they know (an audit did, and read
	// every session), a node id, a store or team key. Closing the folder
	// does not take them out, so every start looks. Every folder pisyncd
	// makes in it is 0700: what lies directly in it is what needs looking at.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	var foreign []string
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		// root's are not another user's doing (an operator's sudo pisyncd
		// hub add-node writes into a hub's state dir as root).
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
			foreign = append(foreign, fmt.Sprintf("%s (uid %d)", e.Name(), st.Uid))
		}
	}
	if len(foreign) > 0 {
		return fmt.Errorf("state dir %s holds what another user owns: %s; it may have been put there while the folder was open to others, and pisyncd would take it for its own (a token, a key, a node id): remove it and start again",
			dir, strings.Join(foreign, ", "))
	}
	return nil
}
