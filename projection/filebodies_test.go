package projection

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestContextBodiesFromFile: a context query reads this machine's lines
// from its session file, and whatever the file became after the lines
// were published (changed in place, truncated, rewritten, replaced by
// another file, a link, a fifo, removed), the answer is the store's: a
// line that does not hash to its event's sha-256 is read from the store.
func TestContextBodiesFromFile(t *testing.T) {
	root := t.TempDir()
	sid := "0199eeee-0000-7000-8000-000000000010"
	const entries = 400
	var data bytes.Buffer
	writeSession(&data, sid, entries, 2<<10, 0, 0, nil)
	path := filepath.Join(root, "--files--", "2026-11-30T01-00-00-000Z_"+sid+".jsonl")
	writeFile(t, path, data.Bytes())
	orig := bytes.Clone(data.Bytes())

	n := startNode(t, root, t.TempDir())
	w := n.worker
	w.opts.MaxBodyBytes = 1 // keep no window: every query reads its bodies
	w.opts.ReadAhead = 64 << 10
	waitFor(t, 60*time.Second, func() (bool, string) {
		var cv ContextView
		n.kvGet(sessionKey(sid, "ctx"), &cv)
		return cv.Entries == entries, fmt.Sprintf("%d of %d entries projected", cv.Entries, entries)
	})
	// The tailer is stopped so that what is done to the file below stays
	// what the file holds: it would publish a changed line as a new one.
	n.cancel()
	if err := <-n.done; err != nil {
		t.Fatalf("tailer: %v", err)
	}
	n.cancel = nil

	query := func() (string, int64, int64) {
		t.Helper()
		st0 := w.Stats()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var b bytes.Buffer
		if err := w.WriteContext(ctx, &b, sid, "", w.Rules()); err != nil {
			t.Fatalf("context: %v", err)
		}
		st := w.Stats()
		return b.String(), st.BodiesFromFile - st0.BodiesFromFile, st.BodiesFromStore - st0.BodiesFromStore
	}
	w.opts.SessionsDir = ""
	want, file, store := query()
	if file != 0 || store != entries {
		t.Fatalf("without a sessions dir: %d bodies from the file, %d from the store; want 0 and %d", file, store, entries)
	}
	w.opts.SessionsDir = root

	check := func(name string, wantFile func(int64) bool) {
		t.Helper()
		got, file, store := query()
		if got != want {
			t.Errorf("%s: context differs from the store's (%d bytes, want %d)", name, len(got), len(want))
		}
		if file+store != entries || !wantFile(file) {
			t.Errorf("%s: %d bodies from the file, %d from the store", name, file, store)
		}
		t.Logf("%s: %d bodies from the file, %d from the store", name, file, store)
	}
	all := func(n int64) bool { return n == entries }
	none := func(n int64) bool { return n == 0 }
	some := func(n int64) bool { return n > 0 && n < entries }

	check("untouched", all)

	// One line changed in place, same length: that line alone from the store.
	changed := bytes.Clone(orig)
	i := bytes.Index(changed, []byte("message 200 "))
	changed[i+len("message 200 ")] = 'y'
	writeFile(t, path, changed)
	check("changed in place", func(n int64) bool { return n == entries-1 })

	// Truncated in the middle: the lines past the end from the store.
	writeFile(t, path, orig[:len(orig)/2])
	check("truncated", some)

	// Rewritten: the same bytes one line later (a line inserted before).
	writeFile(t, path, append([]byte(header(sid)+"\n"), orig...))
	check("rewritten", none)

	// Replaced by another file (a new inode) with the original content.
	os.Remove(path)
	writeFile(t, path, orig)
	check("replaced, same content", all)

	// A link to the same content is not followed.
	other := filepath.Join(t.TempDir(), "copy.jsonl")
	writeFile(t, other, orig)
	os.Remove(path)
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	check("a link", none)

	// A fifo would block a read: it is not opened for reading.
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	check("a fifo", none)

	os.Remove(path)
	check("removed", none)
}
