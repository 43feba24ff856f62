package admit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// ownLog is this machine's log as the gate asks it: the sessions it holds.
type ownLog struct {
	mu   sync.Mutex
	sids map[string]bool
}

func (l *ownLog) Last(_ context.Context, sid string) (uint64, *eventlog.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sids[sid] {
		return 1, &eventlog.Event{}, nil
	}
	return 0, nil, nil
}

func (l *ownLog) add(sid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sids[sid] = true
}

// TestOwnSessionsPutOffUntilTheFirstRead: a session of this node id that
// the log does not hold, met before the first read of the files here is
// done, is answered for once it is (SettleOwn): a session the first read
// published again (a state dir restored from an older copy) is no other
// machine's, one it did not is. Answered at once, the restored machine was
// told another machine ran as it (a probe, 2026-12-07); after SettleOwn, a
// session is answered for at once, as before.
func TestOwnSessionsPutOffUntilTheFirstRead(t *testing.T) {
	ctx := context.Background()
	var out testenv.LogBuffer
	log := &ownLog{sids: map[string]bool{}}
	g := New("me", Limits{}, history{}, out.Logger())
	g.WatchOwn(log)
	g.PutOffOwn()
	for _, sid := range []string{"restored", "twin"} {
		if err := g.Admit(ctx, from("me", sid, hdrOf(sid)), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if st := g.Stats(); st.NotWrittenHere != 0 {
		t.Fatalf("before the first read: %d sessions counted as another machine's", st.NotWrittenHere)
	}
	log.add("restored") // the first read published it again from its file
	// A file here holds one the first read found on the hub already, and
	// did not publish again.
	g.SettleOwn(ctx, func(sid string) bool { return sid == "onfile" })
	if err := g.Admit(ctx, from("me", "onfile", hdrOf("onfile")), time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.NotWrittenHere != 1 || st.NotWrittenExample != "twin" {
		t.Fatalf("after the first read: %d sessions (%q), want 1 (twin)", st.NotWrittenHere, st.NotWrittenExample)
	}
	if err := g.Admit(ctx, from("me", "later", hdrOf("later")), time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := g.Stats(); st.NotWrittenHere != 2 {
		t.Errorf("a session met after the first read: %d counted, want 2", st.NotWrittenHere)
	}
}
