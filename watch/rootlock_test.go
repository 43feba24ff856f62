package watch

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRootLockedByAnotherUser: another user of the machine who may open
// the sessions dir (pi makes it 0755) may flock it too, and kept every
// pisyncd of its owner from starting ("followed by another pisyncd"). A
// lock held by another user's process is no pisyncd of this user's:
// LockRoot says so (the daemon warns and goes on). One held by this
// user's still refuses.
func TestRootLockedByAnotherUser(t *testing.T) {
	if dir := os.Getenv("PISYNC_TEST_HOLD_LOCK"); dir != "" {
		// The child, as another user: hold the lock until stdin closes.
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := fsutil.TryLock(f); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("locked\n")
		io.Copy(io.Discard, os.Stdin)
		return
	}
	root := filepath.Join(t.TempDir(), "sessions")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// This user's own second holder: refused, as two daemons would be.
	l, err := LockRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockRoot(root); !errors.Is(err, ErrRootInUse) {
		t.Errorf("a second lock of this user: %v, want ErrRootInUse", err)
	}
	l.Close()
	if os.Geteuid() != 0 {
		t.Skip("another user's lock needs root to run a process as nobody")
	}
	for d := root; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // nobody opens the folder
	}
	cmd := testenv.AsNobody(t, "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(cmd.Env, "PISYNC_TEST_HOLD_LOCK="+root)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("the other user's process: %q %v", line, err)
	}
	l, err = LockRoot(root)
	if l != nil {
		l.Close()
	}
	if !errors.Is(err, ErrLockedByOther) || errors.Is(err, ErrRootInUse) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("the lock held by another user: %v, want ErrLockedByOther naming uid 65534", err)
	}
}

// TestRootLockAfterTheDirIsMadeAgain: the lock is on the folder; the
// sessions dir deleted and made again while a daemon runs was free, and a
// second pisyncd started on it (a probe, 2026-12-06: every new line then
// went out twice, under two node ids). The running one locks the new
// folder at its next look; when another took it first, it is told to
// stop.
func TestRootLockAfterTheDirIsMadeAgain(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sessions")
	l, err := LockRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	again := func() {
		t.Helper()
		if err := os.RemoveAll(root); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	again()
	if err := l.renew(); err != nil {
		t.Fatal(err)
	}
	if _, err := LockRoot(root); !errors.Is(err, ErrRootInUse) {
		t.Fatalf("a second daemon on the folder made again: %v, want ErrRootInUse", err)
	}
	if err := l.renew(); err != nil {
		t.Fatalf("the same folder looked at again: %v", err)
	}
	// Another took the new folder first.
	again()
	other, err := LockRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := l.renew(); !errors.Is(err, ErrRootInUse) {
		t.Fatalf("renew while another holds the new folder: %v, want ErrRootInUse", err)
	}
	// Away: nothing to lock until it is back.
	os.RemoveAll(root)
	if err := l.renew(); err != nil {
		t.Fatalf("renew while the folder is away: %v", err)
	}
}
