package search

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestIndexFullDisk: the index on a disk that fills up. A batch that bleve
// cannot persist fails, and bleve then holds a segment it closed (the next
// read of it panicked: the soak's daemons died of it); the index is opened
// again from its files before its next use. Nothing panics while the disk
// is full, and once there is room again writes go on, the documents and
// the position the index holds agreeing: every batch up to the position,
// none after.
func TestIndexFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mnt")
	testenv.Tmpfs(t, dir, 8<<20)
	ix, err := Open(filepath.Join(dir, "search"))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Each document is one line, a batch's position its last; a batch that
	// fails is written again, as the worker reads again from the position.
	pos := uint64(0)
	batch := func(n int) error {
		var docs []Doc
		for i := range uint64(n) {
			at := pos + i + 1
			docs = append(docs, Doc{SessionID: fmt.Sprintf("s%d", at%7), Node: "n", EntryID: fmt.Sprint(at), Type: "message", Role: "user",
				Text: fmt.Sprintf("word%d parser.go parseConfig lorem ipsum %d dolor sit amet %d", at, at*7, at*13)})
		}
		err := ix.Write(docs, "PI_LOCAL", pos+uint64(n))
		if err == nil {
			pos += uint64(n)
		}
		return err
	}
	for range 20 {
		if err := batch(50); err != nil {
			t.Fatal(err)
		}
	}
	free := testenv.Fill(t, dir)
	q, _ := ParseQuery("lorem")
	failed := 0
	for range 200 {
		if batch(20) != nil {
			failed++
			// Before anything reads the segment bleve closed.
			if !ix.broken.Load() {
				t.Fatal("a failed write did not mark the index to be opened again")
			}
		}
		ix.Search(context.Background(), q, 10, 0) // an answer or an error, never a panic
		ix.DocCount()
		ix.Position("PI_LOCAL")
	}
	if failed == 0 {
		t.Fatal("no write failed on the full disk: the test did not test it")
	}
	free()
	var werr error
	for range 20 {
		if werr = batch(20); werr == nil {
			break
		}
	}
	if werr != nil {
		t.Fatalf("writes still fail with room on the disk: %v", werr)
	}
	at, err := ix.Position("PI_LOCAL")
	if err != nil {
		t.Fatal(err)
	}
	n, err := ix.DocCount()
	if err != nil || n != at || at != pos {
		t.Fatalf("%d documents (%v), position %d, last batch at %d: want them equal", n, err, at, pos)
	}
	// Documents from before the disk filled are found.
	res, err := ix.Search(context.Background(), mustQuery(t, "word1"), 10, 0)
	if err != nil || res.Total != 1 {
		t.Fatalf("word1: %+v, %v", res, err)
	}
}

func mustQuery(t *testing.T, s string) Query {
	t.Helper()
	q, err := ParseQuery(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
