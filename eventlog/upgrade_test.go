package eventlog_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// oldLocalConfig is PI_LOCAL as pisyncd made it before erase existed.
func oldLocalConfig() jetstream.StreamConfig {
	c := eventlog.LocalStreamConfig()
	c.DenyDelete, c.DenyPurge = true, true
	return c
}

// storedMsg is one message as a direct get returns it.
type storedMsg struct {
	Subject string
	Header  nats.Header
	Data    []byte
}

// oldStore makes an old-style PI_LOCAL in a fresh server, with lines of two
// sessions (single publishes, an atomic batch, a split line), and returns
// every message by sequence.
func oldStore(t *testing.T) (dir string, nc *nats.Conn, js jetstream.JetStream, msgs map[uint64]storedMsg, stop func()) {
	t.Helper()
	dir = t.TempDir()
	srv, nc := storeWith(t, dir)
	ctx := context.Background()
	js, _ = jetstream.New(nc)
	if _, err := js.CreateStream(ctx, oldLocalConfig()); err != nil {
		t.Fatal(err)
	}
	pub := eventlog.NewPublisher(nc, js, 0)
	var last uint64
	var err error
	for _, lines := range [][]eventlog.Line{mkLines(3, 10, "a"), mkLines(40, 10, "b"), secretLines("c")} {
		if last, _, err = pub.Publish(ctx, eventlog.LocalSubject("n1", "s1"), last, lines); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := pub.Publish(ctx, eventlog.LocalSubject("n1", "s2"), 0, mkLines(2, 10, "d")); err != nil {
		t.Fatal(err)
	}
	return dir, nc, js, readStream(t, js), func() { nc.Close(); srv.Close() }
}

func readStream(t *testing.T, js jetstream.JetStream) map[uint64]storedMsg {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, eventlog.LocalStream)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	out := map[uint64]storedMsg{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		out[seq] = storedMsg{Subject: m.Subject, Header: m.Header, Data: m.Data}
	}
	return out
}

// checkUpgraded: the stream takes the new settings and holds exactly the
// messages it held, at the same sequences; a secure delete works.
func checkUpgraded(t *testing.T, js jetstream.JetStream, want map[uint64]storedMsg) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, eventlog.LocalStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.DenyDelete || !cfg.DenyPurge || !reflect.DeepEqual(cfg.Subjects, eventlog.LocalStreamConfig().Subjects) {
		t.Fatalf("upgraded config: deny_delete %v, deny_purge %v, subjects %v", cfg.DenyDelete, cfg.DenyPurge, cfg.Subjects)
	}
	got := readStream(t, js)
	if len(got) != len(want) {
		t.Fatalf("%d messages after the upgrade, want %d", len(got), len(want))
	}
	for seq, w := range want {
		g := got[seq]
		if g.Subject != w.Subject || !bytes.Equal(g.Data, w.Data) || !reflect.DeepEqual(g.Header, w.Header) {
			t.Fatalf("seq %d changed:\n got %s %v %.60q\nwant %s %v %.60q", seq, g.Subject, g.Header, g.Data, w.Subject, w.Header, w.Data)
		}
	}
	if err := s.SecureDeleteMsg(ctx, 1); err != nil {
		t.Fatalf("secure delete after the upgrade: %v", err)
	}
	// Publishing goes on where it was, by subject sequence.
	lg, err := eventlog.OpenLocal(ctx, js.Conn(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	last, _, err := lg.Last(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lg.Publish(ctx, "s2", last, mkLines(1, 10, "e")); err != nil {
		t.Fatalf("publish after the upgrade: %v", err)
	}
}

// TestUpgradeStreamKeepsSequences: a PI_LOCAL made before erase existed
// (deny_delete, which nats-server will not lift in place) is copied into
// the new settings with every message, header and sequence unchanged, and
// no snapshot is left behind.
func TestUpgradeStreamKeepsSequences(t *testing.T) {
	dir, nc, js, want, stop := oldStore(t)
	defer stop()
	ctx := context.Background()
	if _, err := js.UpdateStream(ctx, eventlog.LocalStreamConfig()); err == nil {
		t.Fatal("nats-server lifted deny_delete in place: the upgrade is not needed any more")
	}
	ok, err := eventlog.UpgradeStream(ctx, nc, eventlog.LocalStreamConfig(), dir)
	if err != nil || !ok {
		t.Fatalf("upgrade: %v, %v", ok, err)
	}
	checkUpgraded(t, js, want)
	if m, _ := filepath.Glob(filepath.Join(dir, "*snapshot*")); len(m) > 0 {
		t.Errorf("left behind: %v", m)
	}
	if ok, err := eventlog.UpgradeStream(ctx, nc, eventlog.LocalStreamConfig(), dir); err != nil || ok {
		t.Fatalf("second upgrade: %v, %v; want nothing to do", ok, err)
	}
}

// TestUpgradeStreamResumes: an upgrade cut short where a crash would cut
// it finishes on the next start without losing a message: after the
// snapshot but before the delete (the snapshot is dropped, the stream
// upgraded from itself), after the delete (the stream comes back from the
// snapshot), and with the stream still closed to writers.
func TestUpgradeStreamResumes(t *testing.T) {
	ctx := context.Background()
	snap := func(t *testing.T, dir string, nc *nats.Conn) string {
		path := filepath.Join(dir, eventlog.LocalStream+".upgrade-snapshot")
		if _, err := eventlog.SnapshotStream(ctx, nc, eventlog.LocalStream, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Run("snapshot taken", func(t *testing.T) {
		dir, nc, js, want, stop := oldStore(t)
		defer stop()
		path := snap(t, dir, nc)
		if ok, err := eventlog.UpgradeStream(ctx, nc, eventlog.LocalStreamConfig(), dir); err != nil || !ok {
			t.Fatalf("upgrade: %v, %v", ok, err)
		}
		checkUpgraded(t, js, want)
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("snapshot left: %v", err)
		}
	})
	t.Run("stream deleted", func(t *testing.T) {
		dir, nc, js, want, stop := oldStore(t)
		defer stop()
		path := snap(t, dir, nc)
		if err := js.DeleteStream(ctx, eventlog.LocalStream); err != nil {
			t.Fatal(err)
		}
		if ok, err := eventlog.UpgradeStream(ctx, nc, eventlog.LocalStreamConfig(), dir); err != nil || !ok {
			t.Fatalf("upgrade: %v, %v", ok, err)
		}
		checkUpgraded(t, js, want)
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("snapshot left: %v", err)
		}
	})
	t.Run("closed to writers", func(t *testing.T) {
		dir, nc, js, want, stop := oldStore(t)
		defer stop()
		closed := oldLocalConfig()
		closed.Subjects = []string{"pisyncd.upgrading." + eventlog.LocalStream}
		if _, err := js.UpdateStream(ctx, closed); err != nil {
			t.Fatal(err)
		}
		if ok, err := eventlog.UpgradeStream(ctx, nc, eventlog.LocalStreamConfig(), dir); err != nil || !ok {
			t.Fatalf("upgrade: %v, %v", ok, err)
		}
		checkUpgraded(t, js, want)
	})
}
