package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// TestRemoveLeavesNoTrace: Remove unlinks a followed file while it is
// being written and returns once the tailer has let go of it: erasing the
// session's lines afterwards leaves the subject empty for good (no
// tombstone, no line read again), and a file made later at the same path
// and deleted by the user is announced as usual.
func TestRemoveLeavesNoTrace(t *testing.T) {
	root := t.TempDir()
	n := startNode(t, root, t.TempDir())
	path := filepath.Join(root, "--p--", "s.jsonl")
	writeFile(t, path, header("rm1")+"\n"+entry("e1", "", "one")+"\n")
	n.waitLines("rm1", []string{header("rm1"), entry("e1", "", "one")})

	// pi goes on writing while the file is removed.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return // removed
			}
			f.WriteString(entry(fmt.Sprintf("w%d", i), "e1", "more") + "\n")
			f.Close()
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor(t, 10*time.Second, func() (bool, string) {
		n := len(n.lines("rm1"))
		return n >= 4, fmt.Sprintf("%d lines published", n)
	})
	if err := n.tailer.Remove(context.Background(), []string{path}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if f := n.tailer.FilesFor("rm1"); len(f) != 0 {
		t.Fatalf("the tailer still follows %v", f)
	}
	if _, err := eventlog.Erase(context.Background(), n.log.Stream(), n.log.Subject("rm1"), 0); err != nil {
		t.Fatal(err)
	}
	r0 := n.tailer.Stats().Rescans
	waitFor(t, 10*time.Second, func() (bool, string) { return n.tailer.Stats().Rescans >= r0+3, "rescans" })
	if evs := n.events("rm1"); len(evs) != 0 {
		t.Fatalf("published after the removal: %d events, first %+v", len(evs), evs[0])
	}
	if d := n.tailer.Stats().FilesDeleted; d != 0 {
		t.Errorf("%d deletion(s) counted", d)
	}

	// The path is the user's again.
	writeFile(t, path, header("rm2")+"\n"+entry("x1", "", "new")+"\n")
	n.waitLines("rm2", []string{header("rm2"), entry("x1", "", "new")})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		evs := n.events("rm2")
		return len(evs) == 3 && evs[2].Op == eventlog.OpDelete, fmt.Sprintf("%d events of rm2", len(evs))
	})
}
