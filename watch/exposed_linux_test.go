package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestLinksInAFolderOthersMayWrite: in a project folder every user may
// write (pi makes its folders under the user's umask: 0777 under umask
// 000), another user swaps their link to this user's private session file
// with a file of their own, name for name, all the time the tailer reads
// the folder (renameat2 RENAME_EXCHANGE, as the probe's attacker did).
// The private session is never published, whichever name the tailer
// looks at when; this user's own link in that folder is not followed
// either (a link there can be swapped after its check), and says so; a
// session file of this user's there is published. (Before, the open
// followed the link and the owner was checked after it: a local probe,
// 2026-12-07, had a 0600 session of the user's published in 20 s.)
func TestLinksInAFolderOthersMayWrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to another user (chown)")
	}
	const other = 4242
	root := t.TempDir()
	open := filepath.Join(root, "--open--")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(open, "mine.jsonl"), header("mine")+"\n"+entry("e1", "", "mine")+"\n")
	private := filepath.Join(t.TempDir(), "private.jsonl")
	writeFile(t, private, header("private")+"\n"+entry("e1", "", "a secret of this user's")+"\n")
	ownLinked := filepath.Join(t.TempDir(), "own.jsonl")
	writeFile(t, ownLinked, header("ownlinked")+"\n"+entry("e1", "", "own")+"\n")
	if err := os.Symlink(ownLinked, filepath.Join(open, "own-link.jsonl")); err != nil {
		t.Fatal(err)
	}
	// The other user's two names: a link to the private file, and a file
	// of their own, exchanged.
	bait, swap := filepath.Join(open, "bait.jsonl"), filepath.Join(open, "swap.tmp")
	if err := os.Symlink(private, bait); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(bait, other, other); err != nil {
		t.Fatal(err)
	}
	writeFile(t, swap, header("theirs")+"\n"+entry("e1", "", "theirs")+"\n")
	if err := os.Chown(swap, other, other); err != nil {
		t.Fatal(err)
	}

	var logs testenv.LogBuffer
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 20 * time.Millisecond, Logger: logs.Logger()}, nil)
	var swapping sync.WaitGroup
	stop := make(chan struct{})
	swaps := 0
	swapping.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, bait, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
			swaps++
		}
	})
	// As long as the tailer takes for 50 rescans of the folder.
	waitFor(t, 60*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.Rescans >= 50, fmt.Sprintf("%d rescans", st.Rescans)
	})
	close(stop)
	swapping.Wait()
	waitSessions(n, []string{"mine"})
	if got := n.lines("private"); len(got) > 0 {
		t.Errorf("this user's private session was published through the other user's link (%d swaps): %q", swaps, got)
	}
	if got := n.lines("ownlinked"); len(got) > 0 {
		t.Errorf("a link in a folder every user may write was followed: %q", got)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "a link in a folder other users may write: not followed"), "the own link not followed is not said:\n" + logs.String()
	})
	if c := strings.Count(logs.String(), "level=WARN msg=\"another user's file"); c > 4 {
		t.Errorf("%d warnings of another user's file in one minute, for two names", c)
	}
	t.Logf("%d swaps", swaps)
}
