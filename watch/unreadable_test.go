package watch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// unprivileged runs the calling test again in a child process as user
// nobody when the tests run as root, for whom no permission bit means
// anything; it reports whether the caller is to run the test itself (not
// root, or the child).
func unprivileged(t *testing.T) bool {
	t.Helper()
	if os.Getuid() != 0 {
		return true
	}
	cmd := testenv.AsNobody(t, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Log("passed as user nobody")
	return false
}

// TestUnreadableFolderIsReportedOnce: a project folder the daemon may not
// read is logged once when found so, and once when readable again (its
// sessions are published then), not at every rescan; status counts it.
func TestUnreadableFolderIsReportedOnce(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "--ok--", "s1.jsonl"), header("s1")+"\n")
	locked := filepath.Join(root, "--locked--")
	writeFile(t, filepath.Join(locked, "s2.jsonl"), header("s2")+"\n")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o700) })
	logs := &testenv.LogBuffer{}
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 100 * time.Millisecond, Logger: newTestLogger(logs)}, nil)
	n.waitLines("s1", []string{header("s1")})
	rescans := func(k int64) {
		r0 := n.tailer.Stats().Rescans
		waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+k, "rescans" })
	}
	rescans(5)
	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	if st := n.tailer.Stats(); st.UnreadableFolders != 1 || count("folder not readable") != 1 || count("cannot watch folder") != 0 {
		t.Fatalf("unreadable %d, logged:\n%s", st.UnreadableFolders, logs.String())
	}
	if err := os.Chmod(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	n.waitLines("s2", []string{header("s2")})
	rescans(5)
	if st := n.tailer.Stats(); st.UnreadableFolders != 0 || count("folder not readable") != 1 || count("folder readable again") != 1 {
		t.Fatalf("unreadable %d, logged:\n%s", st.UnreadableFolders, logs.String())
	}
	// New lines in it are followed live again.
	appendFile(t, filepath.Join(locked, "s2.jsonl"), entry("e1", "", "x")+"\n")
	n.waitLines("s2", []string{header("s2"), entry("e1", "", "x")})
}

// TestUnreadableSessionsDirInStatus: a sessions dir the daemon may not
// read any more is in its status while the walks fail, with the fix, and
// not once they work again. Before, the log said it once and status showed
// nothing wrong (a disk probe, 2026-12-07).
func TestUnreadableSessionsDirInStatus(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "--p--", "s1.jsonl"), header("s1")+"\n")
	n := startNodeWith(t, root, t.TempDir(), Options{RescanInterval: 100 * time.Millisecond}, nil)
	n.waitLines("s1", []string{header("s1")})
	if err := os.Chmod(root, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(root, 0o700) })
	waitFor(t, 10*time.Second, func() (bool, string) {
		e := n.tailer.Stats().RescanError
		return strings.Contains(e, "permission denied") && strings.Contains(e, "chmod u+rx"), "rescan error " + e
	})
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		e := n.tailer.Stats().RescanError
		return e == "", "rescan error " + e
	})
}
