package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSessionsDirAwayIsNoDeletion: a sessions dir moved away a moment (a
// backup tool), or left without any of its session files (a file system
// no longer mounted under it), is an outage: no session is published
// deleted, and lines written once it is back are published. (Before, the
// move published a tombstone for every session, and then a restore.)
func TestSessionsDirAwayIsNoDeletion(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sessions")
	p := filepath.Join(root, "--p--", "s1.jsonl")
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n")
	writeFile(t, filepath.Join(root, "--p--", "s2.jsonl"), header("s2")+"\n")
	n := startNode(t, root, t.TempDir())
	want := []string{header("s1"), entry("a1", "", "one")}
	n.waitLines("s1", want)
	away := func(want bool) {
		t.Helper()
		waitFor(t, 10*time.Second, func() (bool, string) {
			st := n.tailer.Stats()
			return st.SessionsDirAway == want, "sessionsDirAway " + map[bool]string{true: "true", false: "false"}[st.SessionsDirAway]
		})
	}
	for i, c := range []struct{ from, to string }{
		{root, filepath.Join(base, "moved")},                                     // the folder itself
		{filepath.Join(root, "--p--"), filepath.Join(base, "project-elsewhere")}, // every file in it
	} {
		if err := os.Rename(c.from, c.to); err != nil {
			t.Fatal(err)
		}
		away(true)
		if err := os.Rename(c.to, c.from); err != nil {
			t.Fatal(err)
		}
		line := entry("b"+string(rune('1'+i)), "a1", "back")
		appendFile(t, p, line+"\n")
		want = append(want, line)
		n.waitLines("s1", want)
		away(false)
	}
	for _, sid := range []string{"s1", "s2"} {
		for _, ev := range n.events(sid) {
			if ev.Op != "" {
				t.Errorf("%s: a %s event while the sessions dir was away", sid, ev.Op)
			}
		}
	}
	if st := n.tailer.Stats(); st.FilesDeleted != 0 {
		t.Errorf("filesDeleted %d", st.FilesDeleted)
	}
}

// TestUnreadablePathIsPassedOver: a folder the system cannot open (here a
// path longer than PATH_MAX) is passed over and counted, and the rest of
// the tree is followed, at start and after. (Before, the walk stopped at
// it: the tailer failed at start, and every rescan failed.)
func TestUnreadablePathIsPassedOver(t *testing.T) {
	root := t.TempDir()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("L", 250)
	for range 18 { // 18 × 251 bytes: past PATH_MAX (4096)
		if err := unix.Mkdirat(fd, name, 0o700); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	writeFile(t, filepath.Join(root, "--p--", "s1.jsonl"), header("s1")+"\n"+entry("a1", "", "one")+"\n")
	n := startNode(t, root, t.TempDir())
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.UnreadableFolders == 1 && st.Rescans > 2, "unreadable folders and rescans"
	})
	appendFile(t, filepath.Join(root, "--p--", "s1.jsonl"), entry("a2", "a1", "two")+"\n")
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one"), entry("a2", "a1", "two")})
}

// TestLinkedFolderAwayIsNoDeletion: a linked project folder whose target
// goes while the daemon runs (a drive unmounted) is counted as a folder not
// readable, and its sessions are not published deleted; lines written once
// it is back are published.
func TestLinkedFolderAwayIsNoDeletion(t *testing.T) {
	root, drive := t.TempDir(), t.TempDir()
	project := filepath.Join(drive, "project")
	p := filepath.Join(project, "s1.jsonl")
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n")
	if err := os.Symlink(project, filepath.Join(root, "--linked--")); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, root, t.TempDir())
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	if err := os.Rename(project, project+".away"); err != nil {
		t.Fatal(err)
	}
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.UnreadableFolders == 1 && st.Rescans >= r0+3, "the link counted as a folder not readable, and rescans after"
	})
	if err := os.Rename(project+".away", project); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, entry("a2", "a1", "two")+"\n")
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one"), entry("a2", "a1", "two")})
	for _, ev := range n.events("s1") {
		if ev.Op != "" {
			t.Errorf("a %s event while the linked folder was away", ev.Op)
		}
	}
}
