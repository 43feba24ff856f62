package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestOtherUsersFilesNotRead replays a probe's attack: another user, who
// could write in the sessions dir (pi makes its folders under the user's
// umask), planted a link to a private folder of this user's as a project
// folder, a link to a private session file, and a session of their own.
// Before, the daemon read all three and published them (with a hub, to
// the team), and an erase of the linked folder's session deleted the real
// file. Proves that none of them is read, each is said, and this user's
// own files and linked folder still are.
func TestOtherUsersFilesNotRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to another user (chown)")
	}
	const other = 4242
	root := t.TempDir()
	sids := sessionsAround(t, root, "s", 4)
	session := func(dir, sid string) string {
		p := filepath.Join(dir, sid+".jsonl")
		writeFile(t, p, header(sid)+"\n"+entry("e1", "", sid)+"\n")
		return p
	}
	link := func(target, name string, uid int) {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(name, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	// This user's private folder and file, linked by the other user.
	private := t.TempDir()
	session(private, "victimdir")
	link(private, filepath.Join(root, "--evil--"), other)
	privFile := session(t.TempDir(), "victimfile")
	link(privFile, filepath.Join(root, "--p--", "linked.jsonl"), other)
	// A session of the other user's own making.
	planted := session(filepath.Join(root, "--p--"), "planted")
	if err := os.Chown(planted, other, other); err != nil {
		t.Fatal(err)
	}
	// This user's own linked project folder is followed, as pi does.
	mine := t.TempDir()
	session(mine, "mine")
	link(mine, filepath.Join(root, "--mine--"), os.Geteuid())

	var logs testenv.LogBuffer
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 200 * time.Millisecond, Logger: logs.Logger()}, nil)
	waitSessions(n, append(slices.Clone(sids), "mine"))
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.FilesIgnoredBy["another-users-file"] == 2, fmt.Sprintf("ignored %d %v, want 2 another-users-file", st.FilesIgnored, st.FilesIgnoredBy)
	})
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "a link made by another user (uid 4242): not followed"), "the other user's linked folder not said:\n" + logs.String()
	})
	for _, sid := range []string{"victimdir", "victimfile", "planted"} {
		if got := n.lines(sid); len(got) > 0 {
			t.Errorf("session %s, another user's plant, was published: %q", sid, got)
		}
	}
}
