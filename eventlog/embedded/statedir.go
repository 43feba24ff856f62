package embedded

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PrivateStateDir makes the state dir 0700, or makes an existing one the
// user's alone: one made before pisyncd (mkdir under a umask of 022 or 002,
// a folder a tool created) keeps its mode, and the control socket, bound
// with the process's umask before it is chmod'ed 0600, could be reached by
// another user in between (under a umask of 000 an attacker looping on
// connect reached it at the first restart, and read the web view's token
// from /web). Everything pisyncd keeps there is the user's, so the folder
// is closed rather than each file being relied on, and a folder holding a
// file of another user is refused.
func PrivateStateDir(dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	// A folder that others may write into by design (the sticky bit: /tmp,
	// a team's drop folder) is not pisyncd's to close: a typo such as
	// PISYNC_STATE_DIR=/tmp under a service run as root made /tmp 0700.
	if st.Mode()&os.ModeSticky != 0 {
		return fmt.Errorf("state dir %s is a folder shared with other users (mode %#o, sticky, like /tmp): pisyncd keeps its store, control socket and tokens in a folder of its own; set PISYNC_STATE_DIR (a hub's PISYNC_HUB_STATE_DIR) to a new folder (pisyncd makes it 0700), such as %s",
			dir, st.Mode().Perm()|0o1000, filepath.Join(dir, "pisyncd-"+strconv.Itoa(os.Geteuid())))
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	was := st.Mode().Perm()
	if was&0o077 != 0 && !madeByPisyncd(ents) && len(foreignIn(ents)) == 0 {
		// Open to others, holding what pisyncd did not make (a home
		// folder, a project's folder): closing it would change more than
		// pisyncd's own; the user decides.
		return fmt.Errorf("state dir %s is open to other users (mode %#o) and holds what pisyncd did not make (%s): pisyncd would have to close it (0700), as it keeps its store, control socket and tokens there; set PISYNC_STATE_DIR (a hub's PISYNC_HUB_STATE_DIR) to a folder of its own (a new one is made 0700), or chmod 700 %s yourself",
			dir, was, namesOf(ents, 3), dir)
	}
	if was&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("state dir %s is open to other users (mode %#o) and could not be made 0700: %w; use a folder of your own", dir, was, err)
		}
		logger.Warn("the state dir was open to other users: made 0700 (it holds the store, the control socket and the tokens)", "dir", dir, "was", fmt.Sprintf("%#o", was))
	}
	// While it was open (now, or under an earlier version, which left its
	// mode as it found it), another user could put files in it for pisyncd
	// to take as its own: a web-token they know (an audit did, and read
	// every session), a node id, a store or team key. Closing the folder
	// does not take them out, so every start looks, and a start that finds
	// one leaves the folder closed, so that no more come. Every folder
	// pisyncd makes in it is 0700: what lies directly in it is what needs
	// looking at.
	if foreign := foreignIn(ents); len(foreign) > 0 {
		return fmt.Errorf("state dir %s holds what another user owns: %s; it may have been put there while the folder was open to others, and pisyncd would take it for its own (a token, a key, a node id): remove it and start again",
			dir, strings.Join(foreign, ", "))
	}
	return nil
}

// madeByPisyncd reports whether a state dir is pisyncd's: empty, or
// holding a file of pisyncd's own making, by the daemon (a state dir an
// earlier version left open) or by a command run before its first start
// (key init or import, hub add-node).
func madeByPisyncd(ents []os.DirEntry) bool {
	for _, e := range ents {
		switch e.Name() {
		case "lock", "jetstream", "node-id", "team-key.json", "store-key", "nodes", "hub.conf",
			"client-context.json", "client.nk", "web-token", "control.sock", "search", "sessions-dir":
			return true
		}
	}
	return len(ents) == 0
}

// foreignIn lists the entries another user owns. root's are not another
// user's doing (an operator's sudo pisyncd hub add-node writes into a
// hub's state dir as root).
func foreignIn(ents []os.DirEntry) []string {
	var foreign []string
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
			foreign = append(foreign, fmt.Sprintf("%s (uid %d)", e.Name(), st.Uid))
		}
	}
	return foreign
}

// namesOf names up to n entries, and how many more there are.
func namesOf(ents []os.DirEntry, n int) string {
	var names []string
	for i, e := range ents {
		if i == n {
			names = append(names, fmt.Sprintf("and %d more", len(ents)-n))
			break
		}
		names = append(names, e.Name())
	}
	return strings.Join(names, ", ")
}
