package search

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// mappedRss is the resident bytes of this process's mappings of the files
// in paths, from /proc/self/smaps.
func mappedRss(t *testing.T, paths map[string]bool) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		if strings.Contains(fs[0], "-") && len(fs) >= 5 { // a mapping's header line
			in = len(fs) >= 6 && paths[fs[5]]
			continue
		}
		if in && fs[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			n += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrimDropsMappedPages: the pages of a segment file read by this
// process are resident until the trimmer drops them, and are read again
// from the page cache afterwards (a search still finds what it did).
func TestTrimDropsMappedPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/smaps")
	}
	ix := openTest(t, filepath.Join(t.TempDir(), "search"))
	ix.trim.stop() // the test trims itself: the background one would race its reads
	var docs []Doc
	for i := range 2000 {
		docs = append(docs, Doc{SessionID: "s1", EntryID: fmt.Sprint(i), Type: "message", Role: "user",
			Text: fmt.Sprintf("entry %d of the frobnicator test, with words to fill a page: %s", i, strings.Repeat("lorem ipsum ", 20))})
	}
	if err := ix.Write(docs, "PI_LOCAL", 1); err != nil {
		t.Fatal(err)
	}
	adv, err := ix.idx.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	sc := adv.(*scorch.Scorch)
	// The batch's segment is persisted before Write returns; the snapshot
	// that reads it from its file follows.
	var snap *scorch.IndexSnapshot
	paths := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r, err := sc.Reader()
		if err != nil {
			t.Fatal(err)
		}
		snap = r.(*scorch.IndexSnapshot)
		clear(paths)
		for _, seg := range snap.Segments() {
			if m, ok := seg.Segment().(interface{ Path() string }); ok {
				paths[m.Path()] = true
			}
		}
		if len(paths) > 0 && len(paths) == len(snap.Segments()) {
			break
		}
		r.Close()
		if time.Now().After(deadline) {
			t.Fatal("no segment file after 30 s")
		}
		runtime.Gosched()
	}
	defer snap.Close()
	// Read every page of the segments, as a merge does.
	var sum byte
	for _, seg := range snap.Segments() {
		data := seg.Segment().(interface{ Data() []byte }).Data()
		for i := 0; i < len(data); i += 4096 {
			sum += data[i]
		}
	}
	_ = sum
	before := mappedRss(t, paths)
	if before == 0 {
		t.Fatalf("no resident pages of %v after reading them", paths)
	}
	trimSnapshot(snap)
	if after := mappedRss(t, paths); after != 0 {
		t.Errorf("%d bytes of %v still resident after the trim (%d before)", after, paths, before)
	}
	if r := find(t, ix, `frobnicator "entry 1999"`); r.Total != 1 {
		t.Errorf("after the trim, %d hits for entry 1999, want 1", r.Total)
	}
}

// TestTrimmerRunsWhileRead: the trimmer trims every trimEvery while work
// reads the segments or a merge runs, once after, and never while nothing
// happens (it used to run ten times a second for two minutes after every
// write). Fake time (synctest): the counts are exact.
func TestTrimmerRunsWhileRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newTrimmer()
		var n atomic.Int64
		tr.start(func() { n.Add(1) })
		defer tr.stop()
		settle := func(what string, lo, hi int64) {
			t.Helper()
			time.Sleep(time.Hour) // fake time: everything due in the hour has run
			synctest.Wait()
			if got := n.Swap(0); got < lo || got > hi {
				t.Errorf("%s: %d trims, want %d to %d", what, got, lo, hi)
			}
		}
		settle("nothing done", 0, 0)

		tr.enter()
		tr.exit()
		settle("a write", 1, 2)

		tr.enter()
		time.Sleep(time.Second + trimEvery/2)
		synctest.Wait()
		if got := n.Load(); got != 10 {
			t.Errorf("a search of 1.05 s: %d trims while it ran, want 10", got)
		}
		tr.exit()
		settle("after the search", 11, 12)

		tr.event(scorch.Event{Kind: scorch.EventKindPreMergeCheck})
		time.Sleep(3*time.Second + trimEvery/2)
		synctest.Wait()
		if got := n.Load(); got != 30 {
			t.Errorf("a merge of 3.05 s: %d trims while it ran, want 30", got)
		}
		tr.event(scorch.Event{Kind: scorch.EventKindMergerProgress})
		settle("after the merge", 31, 32)

		tr.event(scorch.Event{Kind: scorch.EventKindPersisterProgress})
		settle("a persist", 1, 1)
	})
}

// TestTrimmerHearsScorch: the index's scorch reports its merges to the
// trimmer (the callback is found by name when the index is made, and when
// it is opened again), and the writes and merges are followed by a trim.
func TestTrimmerHearsScorch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "search")
	for _, open := range []string{"made", "opened again"} {
		ix := openTest(t, dir)
		for i := range 20 {
			doc := Doc{SessionID: "s1", EntryID: open + fmt.Sprint(i), Type: "message", Role: "user", Text: "words to index"}
			if err := ix.Write([]Doc{doc}, "PI_LOCAL", uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
			merges, trims := ix.trim.merges.Load(), ix.trim.trims.Load()
			return merges > 0 && trims > 0, fmt.Sprintf("index %s: %d merge rounds reported, %d trims", open, merges, trims)
		})
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
