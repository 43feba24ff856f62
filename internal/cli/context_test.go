package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/session"
)

// TestContextFileShrunk: `context FILE` maps the file; when another
// process cuts it short before the bodies are written, the read of a body
// faults, and the command fails with an error instead of crashing. The
// bodies of a file this size are written on two goroutines
// (session.WriteContext): cut to nothing, both fault; cut after the first
// chunk (about 128 KiB of bodies), only the helper rendering the second
// one does, and its fault must still come back as the caller's.
func TestContextFileShrunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var b strings.Builder
	b.WriteString(testenv.HeaderAt("0199aaaa-0000-7000-8000-0000000000f1", "/x", "2026-11-30T00:00:00.000Z") + "\n")
	parent := ""
	for i := range 2000 {
		id := fmt.Sprintf("e%07d", i)
		b.WriteString(testenv.EntryAt(id, parent, "2026-11-30T00:00:01.000Z", strings.Repeat("x", 1000)) + "\n")
		parent = id
	}
	for _, cut := range []int64{0, 132 << 10} {
		err := contextCutShort(t, path, b.String(), cut)
		if err == nil || !strings.Contains(err.Error(), "changed while it was read") {
			t.Fatalf("context of a file cut to %d bytes: %v", cut, err)
		}
	}
	// And the command itself on an intact file.
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ContextFile([]string{path, "--json"}, &out, "pisync context FILE", noEnv); err != nil || !bytes.Contains(out.Bytes(), []byte(`"e0001999"`)) {
		t.Fatalf("context FILE: %v, %.200s", err, out.String())
	}
}

// contextCutShort writes data to path, maps and loads it as `context FILE`
// does, cuts the file to cut bytes, and writes its context, with a fault
// on the mapping an error as WriteFileContext makes it.
func contextCutShort(t *testing.T, path, data string, cut int64) (err error) {
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer faultAsError(path, &err)
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	st, _ := file.Stat()
	tree, src, unmap, err := loadContextFile(file, st.Size(), session.RulesAuto)
	if err != nil {
		return err
	}
	defer unmap()
	if err := os.Truncate(path, cut); err != nil {
		t.Fatal(err)
	}
	ix, err := tree.Index()
	if err != nil {
		return err
	}
	return session.WriteReport(io.Discard, ix, src, session.RulesAuto)
}

// noEnv is an empty environment: PISYNC_RULES unset.
func noEnv(string) (string, bool) { return "", false }

// TestContextFileNotAFile: `context FILE` on a named pipe said nothing and
// waited for ever (opening one waits for a writer); on a device, or a pipe
// with a writer (`<(cat s.jsonl)`), it said "empty file". Each is refused
// at once, naming what it is.
func TestContextFileNotAFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "s.jsonl")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{fifo, "is a pipe, not a session file"},
		{os.DevNull, "is a device, not a session file"},
	} {
		var err error
		testenv.Within(t, 30*time.Second, "context "+c.path, func() {
			err = WriteFileContext(io.Discard, c.path, "", true, session.RulesAuto)
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("context %s: %v, want %q", c.path, err, c.want)
		}
	}
}

// TestContextFileNotASession: a file pi would refuse is named as such,
// with what it lacks (it said "session: load: session: not a valid pi
// session").
func TestContextFileNotASession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "garbage.jsonl")
	if err := os.WriteFile(path, []byte("garbage\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := WriteFileContext(io.Discard, path, "", true, session.RulesAuto)
	if err == nil || !strings.Contains(err.Error(), path+" is not a pi session: the first line pi can read in it is not a session header") || strings.Contains(err.Error(), "load:") {
		t.Errorf("got %v", err)
	}
}

// TestContextFileEmpty: an empty file's context is pi's, an empty one (pi
// writes a header into the file and opens a session of no entries), as a
// header alone gives it; it was the error "session: empty file".
func TestContextFileEmpty(t *testing.T) {
	dir := t.TempDir()
	empty, header := filepath.Join(dir, "empty.jsonl"), filepath.Join(dir, "header.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(header, []byte(`{"type":"session","version":3,"id":"0199aaaa-0000-7000-8000-0000000000aa","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var got, want strings.Builder
	if err := WriteFileContext(&got, empty, "", true, session.RulesAuto); err != nil {
		t.Fatalf("context of an empty file: %v", err)
	}
	if err := WriteFileContext(&want, header, "", true, session.RulesAuto); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() || !strings.Contains(got.String(), `"leafId":null,"contextEntryIds":[],"messages":[]`) {
		t.Errorf("an empty file's context:\n%s\nwant\n%s", got.String(), want.String())
	}
}

// TestContextEmptyLeafRefused: `--leaf ""` is an error, as pi's
// branch("") is (no entry has that id); it printed the context at the
// file's own leaf (a probe's finding). --leaf left out still means the
// file's leaf.
func TestContextEmptyLeafRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	body := `{"type":"session","version":3,"id":"0199aaaa-0000-7000-8000-0000000000aa","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}` + "\n" +
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	err := ContextFile([]string{path, "--leaf", ""}, io.Discard, "pisync context FILE", none)
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--leaf is empty") {
		t.Errorf(`--leaf "": %v, want a usage error naming the empty --leaf`, err)
	}
	if err := ContextFile([]string{path, "--json"}, io.Discard, "pisync context FILE", none); err != nil {
		t.Errorf("no --leaf: %v", err)
	}
}
