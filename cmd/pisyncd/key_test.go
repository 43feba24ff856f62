package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestKeyCommand: pisyncd key init, status, export, import, rotate and
// token, through Main as a user runs them, with their exit codes.
func TestKeyCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("PISYNC_STATE_DIR", filepath.Join(home, "state"))
	t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(home, "sessions"))
	t.Setenv("PISYNC_KEY_FILE", "")
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := Main(append([]string{"key"}, args...), &out, &errb); code != want {
			t.Fatalf("key %v: exit %d, want %d\n%s%s", args, code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	if out := run(1, "status"); !strings.Contains(out, "no team key") {
		t.Fatalf("status without a key: %s", out)
	}
	// --json answers on stdout with the same exit status (it was 0).
	var jout, jerr bytes.Buffer
	if code := Main([]string{"key", "status", "--json"}, &jout, &jerr); code != 1 {
		t.Errorf("key status --json without a key: exit %d, want 1 as without --json", code)
	}
	var none struct {
		Present *bool `json:"present"`
	}
	if err := json.Unmarshal(jout.Bytes(), &none); err != nil || none.Present == nil || *none.Present {
		t.Errorf("key status --json without a key: %q (%v), want present false", jout.String(), err)
	}
	run(2, "frobnicate")
	run(0, "init")
	path := filepath.Join(home, "state", keyring.FileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("keyring %v %v", fi, err)
	}
	if out := run(1, "init"); !strings.Contains(out, "already") {
		t.Fatalf("a second init: %s", out)
	}
	var st keyStatus
	if err := json.Unmarshal([]byte(run(0, "status", "--json")), &st); err != nil || len(st.Keys) != 1 || st.Current != st.Keys[0].ID {
		t.Fatalf("status: %+v %v", st, err)
	}
	block := run(0, "export")
	run(0, "rotate")
	r, err := keyring.Load(path)
	if err != nil || len(r.Keys) != 2 || r.Current == st.Current {
		t.Fatalf("after rotate: %+v %v", r, err)
	}
	if got := strings.TrimSpace(run(0, "token", "s-1")); got != seal.Token(r, "s-1") {
		t.Fatalf("token %q", got)
	}
	// No token for what can be no session's id (before: one for any).
	if out := run(2, "token", ""); !strings.Contains(out, "the session id is empty") {
		t.Errorf("token of an empty id: %s", out)
	}
	if out := run(1, "token", strings.Repeat("s", 300)); !strings.Contains(out, "no session has this id") {
		t.Errorf("token of an over-long id: %s", out)
	}

	// Another machine imports the first block, then the rotated one.
	t.Setenv("PISYNC_KEY_FILE", filepath.Join(home, "other", "team-key.json"))
	file := filepath.Join(home, "block.txt")
	os.WriteFile(file, []byte(strings.Replace(block, block[len("-----BEGIN PISYNC TEAM KEY-----\n")+3:][:1], "9", 1)), 0o600)
	if out := run(1, "import", file); !strings.Contains(out, "typo") {
		t.Fatalf("a damaged block: %s", out)
	}
	os.WriteFile(file, []byte(block), 0o600)
	run(0, "import", file)
	os.WriteFile(file, []byte(keyring.Export(r)), 0o600)
	run(0, "import", file)
	other, err := keyring.Load(filepath.Join(home, "other", "team-key.json"))
	if err != nil || other.Current != r.Current || len(other.Keys) != 2 {
		t.Fatalf("imported: %+v %v", other, err)
	}
	if out := run(0, "import", file); !strings.Contains(out, "nothing new") {
		t.Fatalf("importing again: %s", out)
	}
	// Over a damaged keyring: what to do, and the file left as it was.
	damaged := []byte(`{"version":1,"team":""}`)
	os.WriteFile(filepath.Join(home, "other", "team-key.json"), damaged, 0o600)
	if out := run(1, "import", file); !strings.Contains(out, "cannot be read") || !strings.Contains(out, "move it away") {
		t.Errorf("import over a damaged keyring: %s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(home, "other", "team-key.json")); string(b) != string(damaged) {
		t.Errorf("the damaged keyring was written over: %s", b)
	}
}

// TestKeyImportReadsABoundedFile: key import given a file that is no
// export block and has no end (/dev/zero) says so after a megabyte; it
// read the whole file before, and grew without bound.
func TestKeyImportReadsABoundedFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("PISYNC_STATE_DIR", filepath.Join(home, "state"))
	t.Setenv("PISYNC_SESSIONS_DIR", filepath.Join(home, "sessions"))
	t.Setenv("PISYNC_KEY_FILE", "")
	var out, errb bytes.Buffer
	if code := Main([]string{"key", "import", "/dev/zero"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "larger than") {
		t.Fatalf("key import /dev/zero: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
