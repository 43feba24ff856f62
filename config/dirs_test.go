package config

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlSocketPathTooLong: a state dir whose control socket's path is
// longer than a Unix socket's can be is refused when the settings are
// read, by pisyncd and pisyncd hub alike, with the setting, the limit and
// the fix; one at the limit is taken, and a socket really listens there.
// (Before, the daemon got as far as listening and failed with "bind:
// invalid argument".)
func TestControlSocketPathTooLong(t *testing.T) {
	base := t.TempDir()
	// A folder whose socket path is exactly the limit, and one a byte longer.
	pad := maxSocketPath - len(filepath.Join(base, "d", ControlSocket))
	if pad < 1 {
		t.Skipf("the temporary folder %s is too long for this test", base)
	}
	atLimit := filepath.Join(base, strings.Repeat("a", pad+1))
	over := filepath.Join(base, strings.Repeat("b", pad+2))
	if n := len(filepath.Join(atLimit, ControlSocket)); n != maxSocketPath {
		t.Fatalf("test folder: socket path of %d bytes, want %d", n, maxSocketPath)
	}

	t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(base, "s"))
	t.Setenv("PISYNC_STATE_DIR", atLimit)
	if _, err := Load(); err != nil {
		t.Fatalf("a state dir at the limit: %v", err)
	}
	if err := os.MkdirAll(atLimit, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(atLimit, ControlSocket))
	if err != nil {
		t.Fatalf("a socket at the limit the check takes: %v", err)
	}
	ln.Close()

	t.Setenv("PISYNC_STATE_DIR", over)
	_, err = Load()
	want := []string{"PISYNC_STATE_DIR", "Unix socket", "at most", "shorter"}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("a state dir a byte over: err %v, want it to say %q", err, w)
		}
	}
	if err := os.MkdirAll(over, 0o700); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("unix", filepath.Join(over, ControlSocket)); err == nil {
		ln.Close()
		t.Fatalf("the system listens on a socket path of %d bytes: the limit %d is wrong", maxSocketPath+1, maxSocketPath)
	}

	t.Setenv("PISYNC_HUB_LEAF_LISTEN", "127.0.0.1:7422")
	t.Setenv("PISYNC_HUB_STATE_DIR", atLimit)
	if _, err := LoadHub(); err != nil {
		t.Fatalf("a hub state dir at the limit: %v", err)
	}
	t.Setenv("PISYNC_HUB_STATE_DIR", over)
	if _, err := LoadHub(); err == nil || !strings.Contains(err.Error(), "PISYNC_HUB_STATE_DIR") || !strings.Contains(err.Error(), "Unix socket") {
		t.Fatalf("a hub state dir a byte over: err %v", err)
	}
}

// TestFolderSettingIsAFile: a sessions or state dir that is a file is
// refused when the settings are read, naming the setting (pisyncd failed
// at a mkdir under it, "not a directory", naming neither).
func TestFolderSettingIsAFile(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"PISYNC_SESSIONS_DIR", "PISYNC_STATE_DIR"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(base, "s"))
			t.Setenv("PISYNC_STATE_DIR", filepath.Join(base, "st"))
			if _, err := Load(); err != nil {
				t.Fatalf("folders not made yet: %v", err)
			}
			t.Setenv(k, file)
			if _, err := Load(); err == nil || !strings.Contains(err.Error(), k+" "+file+" is a file, not a folder") {
				t.Fatalf("%s a file: err %v", k, err)
			}
		})
	}
	t.Setenv("PISYNC_HUB_LEAF_LISTEN", "127.0.0.1:7422")
	t.Setenv("PISYNC_HUB_STATE_DIR", file)
	if _, err := LoadHub(); err == nil || !strings.Contains(err.Error(), "PISYNC_HUB_STATE_DIR "+file+" is a file") {
		t.Fatalf("hub state dir a file: err %v", err)
	}
}

// TestStateDirInsideSessionsThroughALink: the state dir is refused inside
// the sessions dir however the paths reach it, a symbolic link on either
// side, the state dir not made yet. The check compared the paths as
// written, and both layouts started with the store in the watched tree
// (a config probe's finding).
func TestStateDirInsideSessionsThroughALink(t *testing.T) {
	x := t.TempDir()
	if err := os.MkdirAll(filepath.Join(x, "s"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(x, "s"), filepath.Join(x, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ sessions, state string }{
		{"s", "link/st"},     // the state dir's path goes through the link
		{"link", "s/st"},     // the sessions dir's does
		{"link", "link/a/b"}, // both, two levels not made yet
		{"s", "link"},        // the sessions dir itself
		{"s", "s/..st"},      // a name beginning with two dots, taken for "up"
	} {
		t.Run(c.sessions+" "+c.state, func(t *testing.T) {
			t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(x, c.sessions))
			t.Setenv("PISYNC_STATE_DIR", filepath.Join(x, c.state))
			_, err := Load()
			if err == nil || !strings.Contains(err.Error(), "lies inside PISYNC_SESSIONS_DIR") || !strings.Contains(err.Error(), "set PISYNC_STATE_DIR to a folder outside") {
				t.Errorf("err %v, want the state dir refused inside the sessions dir", err)
			}
		})
	}
	// Beside it, or beside its link, is fine.
	for _, state := range []string{"st", "s-state", "link-st"} {
		t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(x, "link"))
		t.Setenv("PISYNC_STATE_DIR", filepath.Join(x, state))
		if _, err := Load(); err != nil {
			t.Errorf("state dir %s: %v", state, err)
		}
	}
}
