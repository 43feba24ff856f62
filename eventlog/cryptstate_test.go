package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestEraseKeysOverRestart: the tombstones a node owes for another
// node's erase survive a restart (the state bucket keeps them); the
// erase event replayed after the restart changes nothing; and neither
// destroys a key message the node sealed after the erase (the session
// went on under the same id): only the key messages from before.
func TestEraseKeysOverRestart(t *testing.T) {
	hubJS, state := leafState(t)
	ctx := context.Background()
	if _, err := eventlog.EnsureStream(ctx, hubJS, eventlog.KeysStreamConfig(1)); err != nil {
		t.Fatal(err)
	}
	ring := keyring.New(time.Now())
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(keyFile, ring); err != nil {
		t.Fatal(err)
	}
	kh := eventlog.HubKeys(ctx, hubJS)
	start := func() *eventlog.Crypt {
		c := eventlog.NewCrypt(keyFile, "w1", true)
		if err := c.UseState(ctx, state); err != nil {
			t.Fatal(err)
		}
		return c
	}
	const sid = "0199eeee-0000-7000-8000-000000000001"
	tok := seal.Token(ring, sid)
	prefix := eventlog.KeySubject("w1", tok)
	sealOne := func(c *eventlog.Crypt, srcSeq uint64) {
		t.Helper()
		l := mkLines(1, 50, sid)[0]
		l.SrcSeq = srcSeq
		if _, _, err := eventlog.SealLine(c, sid, &l, kh); err != nil {
			t.Fatal(err)
		}
	}
	// live lists the key subjects of the session whose message is a key
	// message, not a tombstone.
	live := func() []string {
		t.Helper()
		subjs, err := eventlog.KeySubjects(ctx, hubJS, prefix+".>")
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := hubJS.Stream(ctx, eventlog.KeysStream)
		var out []string
		for _, s := range subjs {
			m, err := keys.GetLastMsgForSubject(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Data) > 0 {
				out = append(out, s)
			}
		}
		return out
	}

	c := start()
	sealOne(c, 1)
	before := live()
	if len(before) != 1 {
		t.Fatalf("key subjects before the erase: %v", before)
	}
	if err := c.EraseKeys(sid, 100); err != nil {
		t.Fatal(err)
	}
	sealOne(c, 2) // the session goes on here: a new data key
	// Restart before the forwarder destroyed anything.
	c = start()
	if toks := eventlog.KeyErasures(c); !slices.Equal(toks, []string{tok}) {
		t.Fatalf("tombstones owed after a restart: %v, want [%s]", toks, tok)
	}
	if err := c.EraseKeys(sid, 100); err != nil { // the erase event replayed
		t.Fatal(err)
	}
	sealOne(c, 3) // and again after the restart
	if err := eventlog.EraseKeysNow(c, tok, kh); err != nil {
		t.Fatal(err)
	}
	after := live()
	if len(after) != 2 || slices.Contains(after, before[0]) {
		t.Fatalf("key messages left: %v; want the two sealed after the erase, not %s", after, before[0])
	}
	// Done, and done over a restart: a replay owes nothing.
	c = start()
	if err := c.EraseKeys(sid, 100); err != nil {
		t.Fatal(err)
	}
	if toks := eventlog.KeyErasures(c); len(toks) != 0 {
		t.Fatalf("tombstones owed after the erase was done and replayed: %v", toks)
	}
	// A later erase of the session destroys what came since.
	if err := c.EraseKeys(sid, 200); err != nil {
		t.Fatal(err)
	}
	if err := eventlog.EraseKeysNow(c, tok, kh); err != nil {
		t.Fatal(err)
	}
	if l := live(); len(l) != 0 {
		t.Fatalf("key messages left after the second erase: %v", l)
	}
}

// TestAutoFailsClosedWhenTheKeyringGoes: a node that has sealed its lines
// (under auto, with a keyring) and then finds no keyring file (moved, a
// state dir restored without it, another PISYNC_KEY_FILE) forwards
// nothing after a restart and says why, where before it sent every new
// line to the hub in clear, sealed sessions included, without a word.
// Under the running daemon, status says the file is gone while the key
// read before seals on. A node that never sealed still sends in clear.
func TestAutoFailsClosedWhenTheKeyringGoes(t *testing.T) {
	_, state := leafState(t)
	ctx := context.Background()
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	start := func() *eventlog.Crypt {
		c := eventlog.NewCrypt(keyFile, "w1", false)
		if err := c.UseState(ctx, state); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, sealed, err := eventlog.HubSubject(start(), "s1"); err != nil || sealed {
		t.Fatalf("auto, never sealed, no keyring: sealed %v, %v; want in clear", sealed, err)
	}
	ring := keyring.New(time.Now())
	if err := keyring.Save(keyFile, ring); err != nil {
		t.Fatal(err)
	}
	c := start()
	if _, sealed, err := eventlog.HubSubject(c, "s1"); err != nil || !sealed {
		t.Fatalf("auto with a keyring: sealed %v, %v", sealed, err)
	}
	if err := os.Rename(keyFile, keyFile+".moved"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() (bool, string) {
		st := c.Status()
		return strings.Contains(st.KeyError, "is gone") && st.CurrentKey == ring.Current, fmt.Sprintf("status under the running daemon: %+v", st)
	})
	if _, sealed, err := eventlog.HubSubject(c, "s1"); err != nil || !sealed {
		t.Errorf("the running daemon with its file gone: sealed %v, %v; want the key read before", sealed, err)
	}
	c = start() // a restart
	if _, _, err := eventlog.HubSubject(c, "s1"); !errors.Is(err, eventlog.ErrNoTeamKey) {
		t.Fatalf("auto after sealing, keyring gone, restarted: %v, want ErrNoTeamKey", err)
	}
	if st := c.Status(); st.SealedFor != ring.Team || !strings.Contains(st.KeyError, "is gone") || st.ForwardWaiting == "" {
		t.Errorf("status: %+v", st)
	}
	if err := os.Rename(keyFile+".moved", keyFile); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, func() (bool, string) {
		_, sealed, err := eventlog.HubSubject(c, "s1")
		return err == nil && sealed, fmt.Sprintf("with the file back: sealed %v, %v", sealed, err)
	})
}

// leafState starts a hub and a workstation linked to it (hubAndLeaf) and
// returns the hub's JetStream and the workstation's state bucket.
func leafState(t *testing.T) (jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	hubJS, ws, _ := hubAndLeaf(t)
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	wjs, _ := jetstream.New(nc)
	state, err := eventlog.OpenState(context.Background(), wjs)
	if err != nil {
		t.Fatal(err)
	}
	return hubJS, state
}

// TestKeyringOfAnotherTeamAfterARestart: a keyring of another team put in
// the key file's place while the daemon was stopped (key init after the
// file was moved away) is taken, as under a running daemon, and said the
// same way, in the log and in status; before, only a running daemon said
// it, and after a restart the node sealed for the new team without a word
// (a probe, 2026-12-07). The keyring read either before or after the state.
func TestKeyringOfAnotherTeamAfterARestart(t *testing.T) {
	_, state := leafState(t)
	ctx := context.Background()
	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	ours := keyring.New(time.Now())
	if err := keyring.Save(keyFile, ours); err != nil {
		t.Fatal(err)
	}
	c := eventlog.NewCrypt(keyFile, "w1", false)
	if err := c.UseState(ctx, state); err != nil {
		t.Fatal(err)
	}
	if _, sealed, err := eventlog.HubSubject(c, "s1"); err != nil || !sealed {
		t.Fatalf("sealed %v, %v", sealed, err)
	}
	theirs := keyring.New(time.Now())
	if err := keyring.Save(keyFile, theirs); err != nil {
		t.Fatal(err)
	}
	for _, ringFirst := range []bool{false, true} {
		// As the first node left it (a sealed line records the team).
		if _, err := state.Put(ctx, "crypt.sealed", []byte(ours.Team)); err != nil {
			t.Fatal(err)
		}
		var log testenv.LogBuffer
		c := eventlog.NewCrypt(keyFile, "w1", false)
		c.SetLogger(log.Logger())
		if ringFirst {
			c.Status() // reads the keyring
		}
		if err := c.UseState(ctx, state); err != nil {
			t.Fatal(err)
		}
		if _, sealed, err := eventlog.HubSubject(c, "s2"); err != nil || !sealed {
			t.Fatalf("sealed %v, %v", sealed, err)
		}
		st := c.Status()
		if !strings.Contains(st.TeamChanged, "from team "+ours.Team+" to team "+theirs.Team) || !strings.Contains(log.String(), "another team's keyring") {
			t.Errorf("keyring read first %v: status %+v\nlog:\n%s", ringFirst, st, log.String())
		}
	}
}
