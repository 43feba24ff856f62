//go:build soak && linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// The soak's trials: each is one fault in a round (soak_round_test.go),
// and records what it measured in the summary.

// crash kills the daemon at a random moment and starts it again.
func (r *soakRound) crash() {
	r.pause(0, 800*time.Millisecond)
	r.kill()
	snap := r.snapshot()
	r.start()
	r.measure("crash", snap)
}

// diskFull fills the state dir's disk for a while: status must answer and
// report it within two seconds; then the disk is freed.
func (r *soakRound) diskFull() {
	filler, err := testenv.FillDisk(r.state)
	if err != nil {
		r.sum.fail("round %d: fill: %v", r.n, err)
		return
	}
	ts := r.sum.trial("diskFull")
	full := time.Now()
	hold := time.Second + time.Duration(r.rng.Int64N(int64(4*time.Second)))
	reported := false
	for time.Since(full) < hold || (!reported && time.Since(full) < 2*time.Second) {
		st, err := statusWithin(r.state, 2*time.Second)
		if err != nil {
			ts.StatusTimeouts++
			r.sum.fail("round %d: status did not answer %v into a full disk: %v", r.n, time.Since(full).Round(time.Millisecond), err)
		} else if !reported && st.Store != nil && st.Store.State != embedded.StoreOK {
			reported = true
			ts.MaxDetectMs = max(ts.MaxDetectMs, time.Since(full).Milliseconds())
		}
		time.Sleep(100 * time.Millisecond) // a user's pace, not synchronisation
	}
	if !reported {
		ts.NotReported++
		r.sum.fail("round %d: a full state disk was not reported within %v", r.n, hold)
	}
	os.Remove(filler)
	r.measure("diskFull", r.snapshot())
}

// crashWhileFull kills the daemon while the disk is full and starts it
// again on the full disk (it may refuse), then frees the disk.
func (r *soakRound) crashWhileFull() {
	filler, err := testenv.FillDisk(r.state)
	if err != nil {
		r.sum.fail("round %d: fill: %v", r.n, err)
		return
	}
	r.pause(300*time.Millisecond, 1500*time.Millisecond)
	r.kill()
	r.start()
	r.pause(time.Second, 2*time.Second)
	refused := r.exited()
	os.Remove(filler)
	if refused {
		r.sum.trial("crashWhileFull").RefusedStarts++
		r.stop()
		r.start()
	}
	r.measure("crashWhileFull", r.snapshot())
}

// garbage drops a file of random bytes (not a session: ignored) and begins
// a session whose appends mix entries with malformed lines, scalars, blank
// lines and binary (skipped, the entries published).
func (r *soakRound) garbage() {
	dir := filepath.Join(r.sessions, fmt.Sprintf("--garbage-%d--", r.rng.IntN(1e6)))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		r.sum.fail("round %d: %v", r.n, err)
		return
	}
	junk := make([]byte, 4<<10+r.rng.IntN(60<<10))
	for i := range junk {
		junk[i] = byte(r.rng.UintN(256))
	}
	os.WriteFile(filepath.Join(dir, "2026-11-30T00-00-00-000Z_junk.jsonl"), junk, 0o600)

	r.extra++
	sid := fmt.Sprintf("0199cccc-0000-7000-8000-%012d", r.rng.IntN(1e12))
	path := filepath.Join(dir, "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	r.files = append(r.files, path)
	hdr := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00.000Z","cwd":"/garbage"}`, sid)
	os.WriteFile(path, []byte(hdr+"\n"), 0o600)
	bad := []string{`{"type":"message","id":`, `42`, `"just a string"`, ``, `   `, `null`, `[1,2`, `}{`, "\x00\x01\x02\xff\xfe"}
	for i := 0; i < 20; i++ {
		var b strings.Builder
		for k := 0; k < 1+r.rng.IntN(4); k++ {
			if r.rng.IntN(2) == 0 {
				b.WriteString(bad[r.rng.IntN(len(bad))] + "\n")
			} else {
				fmt.Fprintf(&b, `{"type":"message","id":"g%d-%d","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":"between garbage","timestamp":1}}`+"\n", i, k)
			}
		}
		appendTo(path, b.String())
		time.Sleep(50 * time.Millisecond) // pi's pace, not synchronisation
	}
}

// fifo puts a FIFO where a session file would be. Opening it for reading
// blocks until a writer comes; the trial ends by finding out whether the
// daemon was blocked on it (a non-blocking open for writing succeeds only
// with a reader there), then releases any such reader and removes it.
func (r *soakRound) fifo() {
	dir := filepath.Join(r.sessions, fmt.Sprintf("--fifo-%d--", r.rng.IntN(1e6)))
	os.MkdirAll(dir, 0o700)
	path := filepath.Join(dir, "2026-11-30T00-00-00-000Z_fifo.jsonl")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		r.sum.fail("round %d: mkfifo: %v", r.n, err)
		return
	}
	r.pause(time.Second, 2*time.Second)
	if probe, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		r.sum.trial("fifo").BlockedReaders++
		defer probe.Close()
	}
	// A writer held open while the FIFO goes: no reader blocks any more.
	if hold, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		defer hold.Close()
	}
	os.Remove(path)
}

// hugeLine appends a line over PISYNC_MAX_LINE (skipped) and one between
// the chunk size and the limit (published in chunks, reassembled).
func (r *soakRound) hugeLine() {
	err := r.ws.do(func(w *sessionWriter) error {
		i := r.rng.IntN(len(w.files))
		over := entryOfSize(fmt.Sprintf("huge-%d", r.rng.IntN(1e9)), soakMaxLine+1+r.rng.IntN(512<<10))
		big := entryOfSize(fmt.Sprintf("big-%d", r.rng.IntN(1e9)), 300<<10+r.rng.IntN(600<<10))
		return appendTo(w.files[i], over+"\n"+big+"\n")
	})
	if err != nil {
		r.sum.fail("round %d: huge line: %v", r.n, err)
	}
}

// recreate deletes a session file (the daemon publishes a tombstone) and
// puts the same bytes back a moment later (a restore): the session's lines
// stay stored once.
func (r *soakRound) recreate() {
	err := r.ws.do(func(w *sessionWriter) error {
		path := w.files[r.rng.IntN(len(w.files))]
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		r.pause(300*time.Millisecond, time.Second)
		return os.WriteFile(path, data, 0o600)
	})
	if err != nil {
		r.sum.fail("round %d: recreate: %v", r.n, err)
	}
}

func entryOfSize(id string, size int) string {
	head := fmt.Sprintf(`{"type":"message","id":%q,"parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":"`, id)
	tailStr := `","timestamp":1}}`
	return head + strings.Repeat("h", max(size-len(head)-len(tailStr), 0)) + tailStr
}

func appendTo(path, data string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(data)
	return err
}
