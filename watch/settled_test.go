package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestRescanAloneFindsEveryChange: with fsnotify's events dropped, the
// periodic walk must still find every change to files it passes over as
// settled: an append, a same-size edit in place, a new file, a file
// replaced under its name, a deletion. Many files are settled around
// them, so that the walk's skipping is what is exercised, and its folders
// are watched (only the events are dropped), so that the walks that pass
// over settled files without a stat (statEvery) are exercised too: the
// changes must be found by the full walk that follows them.
func TestRescanAloneFindsEveryChange(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	const others = 40
	for i := range others {
		sid := fmt.Sprintf("other%02d", i)
		writeFile(t, filepath.Join(root, "--p--", sid+".jsonl"), header(sid)+"\n"+entry("a", "", "x")+"\n")
	}
	pa, pe, pr, pd := filepath.Join(root, "--q--", "app.jsonl"), filepath.Join(root, "--q--", "edit.jsonl"),
		filepath.Join(root, "--q--", "repl.jsonl"), filepath.Join(root, "--q--", "del.jsonl")
	e1, e2 := entry("e1", "", "first"), entry("e2", "e1", "second")
	writeFile(t, pa, header("app")+"\n"+e1+"\n")
	writeFile(t, pe, header("edit")+"\n"+e1+"\n"+e2+"\n")
	writeFile(t, pr, header("repl")+"\n"+e1+"\n")
	writeFile(t, pd, header("del")+"\n"+e1+"\n")
	n := startNodeWith(t, root, state, Options{RescanInterval: 50 * time.Millisecond}, func(t *Tailer) { t.hintless = true })
	n.waitLines("app", []string{header("app"), e1})
	n.waitLines("edit", []string{header("edit"), e1, e2})
	n.waitLines("repl", []string{header("repl"), e1})
	n.waitLines("del", []string{header("del"), e1})
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := n.tailer.Stats()
		return st.LinesPublished == 2*others+9, fmt.Sprintf("published %d", st.LinesPublished)
	})
	// Let some walks pass over the settled files first.
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })

	n.tailer.settledMu.Lock()
	settled := len(n.tailer.settled)
	n.tailer.settledMu.Unlock()
	if settled != others+4 {
		t.Fatalf("%d files recorded as settled, want %d", settled, others+4)
	}

	appendFile(t, pa, e2+"\n")
	e2b := entry("e2", "e1", "SECOND")
	editInPlace(t, pe, e2, e2b)
	tmp := pr + ".tmp"
	writeFile(t, tmp, header("repl")+"\n"+e2+"\n")
	if err := os.Rename(tmp, pr); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pd); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "--q--", "new.jsonl"), header("new")+"\n"+e1+"\n")

	n.waitLines("app", []string{header("app"), e1, e2})
	n.waitLines("edit", []string{header("edit"), e1, e2, e2b})
	n.waitLines("repl", []string{header("repl"), e1, e2})
	n.waitLines("new", []string{header("new"), e1})
	waitFor(t, 30*time.Second, func() (bool, string) {
		evs := n.events("del")
		last := evs[len(evs)-1]
		return last.Op == eventlog.OpDelete, fmt.Sprintf("last event of del: %q", last.Op)
	})
}
