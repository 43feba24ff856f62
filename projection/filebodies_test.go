package projection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
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

// TestContextBodiesFromFileEdits: under pi-1.6 an entry's body is held
// while its context_edit's body is read, maybe in the next stretch; the
// chunks the file's lines are read into are read into again only once no
// body of them is held, so a small read-ahead (many stretches, chunks
// reused many times) gives the store's answer.
func TestContextBodiesFromFileEdits(t *testing.T) {
	root := t.TempDir()
	sid := "0199eeee-0000-7000-8000-000000000011"
	var data bytes.Buffer
	data.WriteString(header(sid) + "\n")
	parent, edits := "", 0
	for i := range 300 {
		id := fmt.Sprintf("e%04d", i)
		data.WriteString(entry(id, parent, fmt.Sprintf("message %d %s", i, strings.Repeat("x", 2000))) + "\n")
		parent = id
		if i >= 5 && i%7 == 0 {
			eid := fmt.Sprintf("x%04d", i)
			data.WriteString(editLine(eid, parent, fmt.Sprintf("e%04d", i-5)) + "\n")
			parent, edits = eid, edits+1
		}
	}
	writeFile(t, filepath.Join(root, "--edits--", "2026-11-30T01-00-00-000Z_"+sid+".jsonl"), data.Bytes())
	n := startNode(t, root, t.TempDir())
	w := n.worker
	w.opts.MaxBodyBytes = 1
	w.opts.ReadAhead = 16 << 10
	waitFor(t, 60*time.Second, func() (bool, string) {
		var cv ContextView
		n.kvGet(sessionKey(sid, "ctx"), &cv)
		return cv.Entries == 300+edits, fmt.Sprintf("%d of %d entries projected", cv.Entries, 300+edits)
	})
	rules, err := session.ParseRuleSet("pi-1.6")
	if err != nil {
		t.Fatal(err)
	}
	query := func() (string, Stats) {
		t.Helper()
		var b bytes.Buffer
		if err := w.WriteContext(context.Background(), &b, sid, "", rules); err != nil {
			t.Fatalf("context: %v", err)
		}
		return b.String(), w.Stats()
	}
	w.opts.SessionsDir = ""
	want, st0 := query()
	w.opts.SessionsDir = root
	got, st := query()
	if got != want {
		t.Errorf("context from the file differs from the store's (%d bytes, want %d)", len(got), len(want))
	}
	if !strings.Contains(want, `"edited"`) {
		t.Errorf("no edit applied: %.300s", want)
	}
	if file := st.BodiesFromFile - st0.BodiesFromFile; file == 0 || st.BodiesFromStore != st0.BodiesFromStore {
		t.Errorf("%d bodies from the file, %d from the store", file, st.BodiesFromStore-st0.BodiesFromStore)
	}
}

// TestFileChunksRecycledLate: a body stays intact until the caller has
// asked for the one after the next (EachMessage holds an entry while it
// asks for its edit), however many stretches the chunks it was read into
// are read into again. Each stretch here holds two lines, and the stretch
// read ahead is waited for after every ask, so a chunk given back one
// stretch early would be overwritten before the check.
func TestFileChunksRecycledLate(t *testing.T) {
	root := t.TempDir()
	var data bytes.Buffer
	var locs lineLocs
	var refs []session.Ref
	var sizes []int64
	var lines [][]byte
	for i := range 64 {
		line := []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat(string(rune('a'+i%26)), 1000)))
		data.Write(line)
		data.WriteByte('\n')
		ev := &eventlog.Event{Stream: eventlog.LocalStream, Seq: uint64(i + 1), File: "f.jsonl", Off: int64(data.Len()), Raw: line, Sha: sha256.Sum256(line)}
		locs.add(ev)
		refs = append(refs, makeRef(ev.Stream, ev.Seq))
		sizes = append(sizes, int64(len(line)))
		lines = append(lines, line)
	}
	writeFile(t, filepath.Join(root, "f.jsonl"), data.Bytes())
	ix := &session.Index{Refs: refs, Sizes: sizes}
	b := newStreamBodies(context.Background(), nil, nil, map[string]string{}, nil, ix, 2*int64(len(lines[0])+1), 0)
	b.files = newFileBodies(root, locs)
	b.recycle = true
	defer b.close()
	var prev, prevWant []byte
	for k, ref := range refs {
		body, err := b.Body(ref)
		if err != nil {
			t.Fatalf("body %d: %v", k, err)
		}
		if b.pending != nil {
			<-b.pending.done // the next stretch is read: any chunk it took is written
		}
		if !bytes.Equal(body, lines[k]) {
			t.Fatalf("body %d: %.40q, want %.40q", k, body, lines[k])
		}
		if prev != nil && !bytes.Equal(prev, prevWant) {
			t.Fatalf("body %d was overwritten while held: %.40q", k-1, prev)
		}
		prev, prevWant = body, lines[k]
	}
	if got := b.fromFile.Load(); got != int64(len(refs)) {
		t.Errorf("%d bodies from the file, want %d", got, len(refs))
	}
	b.files.mu.Lock()
	free := len(b.files.free)
	b.files.mu.Unlock()
	if free == 0 {
		t.Error("no chunk was given back: the test recycles nothing")
	}
}
