package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// replaceEnv names the file a helper process (this test binary run as
// another user) replaces: TestMain does it and exits, printing the error.
const replaceEnv = "PISYNC_TEST_REPLACE_FILE"

// hintEnv names a folder in which a helper process (as another user)
// tries to make a file, printing OwnFolderHint of the refusal.
const hintEnv = "PISYNC_TEST_HINT_DIR"

func TestMain(m *testing.M) {
	if d := os.Getenv(hintEnv); d != "" {
		_, err := os.OpenFile(filepath.Join(d, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		fmt.Printf("%s\n", OwnFolderHint(err))
		os.Exit(0)
	}
	if p := os.Getenv(replaceEnv); p != "" {
		if err := ReplaceFileKeepOwner(p, []byte("helper's\n")); err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const nobody = testenv.Nobody

func owner(t *testing.T, path string) (uid, gid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}

// TestReplaceKeepsOwner: an operator renewing the hub's certificate as
// root (sudo pisyncd hub certs DIR --renew) left hub-key.pem root's, 0600,
// and the hub, running as its own user, could no longer load it at its
// next reload or start. The replacement now keeps the replaced file's
// owner and group.
func TestReplaceKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to hand a file to another user (CI runs as root)")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "hub-key.pem")
	if err := os.WriteFile(p, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFileKeepOwner(p, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("content %q", b)
	}
	if uid, gid, mode := owner(t, p); uid != nobody || gid != nobody || mode != 0o600 {
		t.Errorf("replaced file: uid %d gid %d mode %v, want %d %d 0600", uid, gid, mode, nobody, nobody)
	}
	// A new file in root's folder is root's, as with WriteFileAtomic.
	q := filepath.Join(dir, "hub.pem")
	if err := ReplaceFileKeepOwner(q, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if uid, _, mode := owner(t, q); uid != 0 || mode != 0o600 {
		t.Errorf("new file: uid %d mode %v, want 0 0600", uid, mode)
	}
	// In the service's folder (a node registered with sudo into the hub's
	// state dir), new folders and files are the service's.
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	nodes := filepath.Join(state, "nodes", "team")
	if err := MkdirAllKeepOwner(nodes); err != nil {
		t.Fatal(err)
	}
	n := filepath.Join(nodes, "laptop.json")
	if err := ReplaceFileKeepOwner(n, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(nodes), nodes, n} {
		if uid, gid, mode := owner(t, p); uid != nobody || gid != nobody || mode&0o077 != 0 {
			t.Errorf("%s: uid %d gid %d mode %v, want the folder's owner's, 0700 or 0600", p, uid, gid, mode)
		}
	}
	if err := MkdirAllKeepOwner(n); err == nil {
		t.Error("MkdirAllKeepOwner over a file: no error")
	}
}

// TestReplaceRefusedForAnotherUsersFile: a user who can write the folder
// but not give a file back to its owner replaces nothing: the owner's
// service would lose its file.
func TestReplaceRefusedForAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a helper as another user (CI runs as root)")
	}
	base, err := os.MkdirTemp("", "replace") // nobody must enter it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "certs")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	p := filepath.Join(dir, "hub-key.pem")
	if err := os.WriteFile(p, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := testenv.AsNobody(t)
	cmd.Env = append(cmd.Env, replaceEnv+"="+p)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the helper replaced root's file: %s", out)
	}
	if !strings.Contains(string(out), "belongs to uid 0") || !strings.Contains(string(out), "sudo -u") {
		t.Errorf("the helper's error does not name the owner and the fix: %s (%v)", out, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "root's\n" {
		t.Errorf("the file was changed: %q", b)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
}

// TestOwnFolderHint: a write refused in a folder of this user's (made
// read-only) is mended by chmod, which the hint names; one refused in
// another user's folder, or for another reason, gets no such hint. (The
// hint told the owner to chown what was already theirs: a probe,
// 2026-12-07.) Run as user nobody, whom a folder's mode binds.
func TestOwnFolderHint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a helper as another user (CI runs as root)")
	}
	hint := func(dir string) string {
		cmd := testenv.AsNobody(t)
		cmd.Env = append(cmd.Env, hintEnv+"="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	base, err := os.MkdirTemp("", "hint") // t.TempDir's parent only root may enter
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(base, "own")
	if err := os.Mkdir(own, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(own, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got := hint(own); got != own+" is this user's and may not be written: chmod u+rwx "+own {
		t.Errorf("a read-only folder of the user's own: hint %q", got)
	}
	others := filepath.Join(base, "others")
	if err := os.Mkdir(others, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := hint(others); got != "" {
		t.Errorf("root's folder: hint %q, want none", got)
	}
	if got := OwnFolderHint(os.ErrNotExist); got != "" {
		t.Errorf("hint %q for a missing file", got)
	}
}
