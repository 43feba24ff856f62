package search

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestWorkerPauseAndRecoveryLogged: an index on a disk that fills up
// stops taking batches; the worker says it paused and retries, and once
// there is room again and a batch is written it says it works again (it
// said nothing before: the log's outage had no end), and the lines that
// came meanwhile are found.
func TestWorkerPauseAndRecoveryLogged(t *testing.T) {
	r := newRig(t)
	r.stopWorker()
	mnt := filepath.Join(t.TempDir(), "mnt")
	testenv.Tmpfs(t, mnt, 8<<20)
	r.dir = filepath.Join(mnt, "search")
	logs := &testenv.LogBuffer{}
	r.logger = logs.Logger()
	r.startWorker()
	r.publish("s1", session("s1", 20, "before")...)
	r.waitTotal("before", 20)

	free := testenv.Fill(t, mnt)
	// Lines until a batch fails: the index may still have room in its
	// open segment for a few.
	i := 0
	for ; !strings.Contains(logs.String(), "search indexing paused; retrying"); i++ {
		if i == 200 {
			t.Fatalf("no pause logged after 200 batches on a full disk:\n%s", logs.String())
		}
		sid := fmt.Sprintf("during%d", i) // lines never published before
		r.publish(sid, session(sid, 20, "during")...)
		time.Sleep(10 * time.Millisecond) // a writer's pace, not synchronisation
	}
	t.Logf("the pause was logged after %d sessions written on the full disk", i)
	free()
	r.publish("s3", session("s3", 20, "after")...)
	r.waitTotal("after", 20)
	testenv.WaitFor(t, 20*time.Second, func() (bool, string) {
		return strings.Contains(logs.String(), "search indexing works again"), "no recovery logged:\n" + logs.String()
	})
}
