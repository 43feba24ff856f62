package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/session"
)

// leaked is the secret the erase tests paste into a session.
const leaked = "sk-live-LEAKED-4f9a1c2e7b"

// grepTree lists the files under dir that contain s.
func grepTree(dir, s string) []string {
	var hits []string
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			hits = append(hits, p)
		}
		return nil
	})
	return hits
}

// leftOf describes what a station still holds of a session: files (live or
// copies), messages other than erase events in PI_LOCAL and PI_ALL, and
// values in the views bucket, history included. "" when nothing.
func leftOf(t *testing.T, s *station, sid string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var left []string
	live, copies, err := replicate.SessionFiles(s.cfg.SessionsDir, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(live)+len(copies) > 0 {
		left = append(left, fmt.Sprintf("files %v %v", live, copies))
	}
	js := s.d.log.JetStream()
	for stream, filter := range map[string]string{
		eventlog.LocalStream: eventlog.LocalSubject(s.name, sid),
		eventlog.AllStream:   eventlog.SessionFilter(sid),
	} {
		st, err := js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) && stream == eventlog.AllStream && len(s.cfg.HubURLs) == 0 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m, err := firstLine(ctx, st, filter); err != nil {
			t.Fatal(err)
		} else if m != nil {
			left = append(left, fmt.Sprintf("%s seq %d on %s", stream, m.Sequence, m.Subject))
		}
	}
	kv, err := js.Stream(ctx, "KV_"+projection.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := kv.Info(ctx, jetstream.WithSubjectFilter("$KV."+projection.Bucket+".s."+sid+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) > 0 {
		left = append(left, fmt.Sprintf("views %v", info.State.Subjects))
	}
	cat, err := s.d.proj.Catalog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cat {
		if c.SessionID == sid {
			left = append(left, "catalog entry")
		}
	}
	return strings.Join(left, "; ")
}

// startHubControl serves the test hub's control socket, as `pisyncd hub`
// does, and points `pisyncd hub erase` at it.
func startHubControl(t *testing.T, h *testHub) {
	t.Helper()
	stop, err := hubControl(h.srv, &config.Hub{StateDir: h.dir, Replicas: 1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	t.Setenv("PISYNC_HUB_STATE_DIR", h.dir)
}

// hubLines counts PI_HUB's messages of a session: all, and erase events.
func (h *testHub) hubLines(t *testing.T, sid string) (total, events int) {
	t.Helper()
	ctx := context.Background()
	s, done := h.stream(t, eventlog.HubStream)
	defer done()
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(eventlog.UpPrefix+".*."+sid))
		if err != nil {
			return total, events
		}
		total++
		if m.Header.Get(eventlog.HdrOp) == eventlog.OpErase {
			events++
		}
		seq = m.Sequence + 1
	}
}

// TestEraseSession: a session written on A, replicated to B and continued
// there, with a leaked secret in lines of both, erased on A: neither A nor
// B keeps a file of it (B's copies in the trash and a staging file left by
// a crash included), a line of it in PI_LOCAL or PI_ALL, or a view of it;
// the hub erase leaves only the erase event; both machines keep working; a
// restart brings nothing back; and the secret is in no file of either
// state dir, nor in the hub's.
func TestEraseSession(t *testing.T) {
	hub := startTestHub(t)
	startHubControl(t, hub)
	// The search index on: the erase must leave nothing of the session
	// in it either (the grep of the state dirs at the end).
	a := newStationWith(t, "ws-a", hub.url(), "", searchOn)
	b := newStationWith(t, "ws-b", hub.url(), "", searchOn)

	sid := "0199ffff-0000-7000-8000-000000000001"
	rel := sessionRel("/work/leak", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	big := strings.Repeat("output ", 50_000) + leaked // over 256 KiB: split into chunks
	mustWriteLines(t, aPath, []string{hdrLine(sid, "/work/leak"), msgLine("e1", "", "hello"),
		msgLine("e2", "e1", "my key is "+leaked), msgLine("e3", "e2", big)})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(b.sessionFiles()[rel])
		return n == 4, fmt.Sprintf("B has %d lines", n)
	})
	appendLine(t, bPath, msgLine("b1", "e3", "B repeats "+leaked))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(a.sessionFiles()[rel])
		return n == 5, fmt.Sprintf("A has %d lines", n)
	})
	// Copies B holds besides its file: one in the trash (an earlier
	// deletion restored since, say), one staged by a crash.
	whole, _ := os.ReadFile(bPath)
	trashCopy := filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "20261130T000000Z_copy.jsonl")
	staged := filepath.Join(filepath.Dir(bPath), ".pisync-0123456789abcdef.tmp")
	for _, p := range []string{trashCopy, staged} {
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, whole, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	other := writeSentinel(t, a, "0199ffff-0000-7000-8000-000000000002")
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[other]) == 2, "other session on B" })
	for _, s := range []*station{a, b} {
		waitSearch(t, s, 2, leaked) // e2 and b1 (e3's text is past search.MaxText)
		if len(grepTree(s.cfg.StateDir, leaked)) == 0 {
			t.Fatalf("%s: the secret is not in the store to begin with: the test shows nothing", s.name)
		}
	}

	// `pisyncd erase` on A.
	ctx := context.Background()
	res, err := eraseViaDaemon(ctx, a.cfg, sid)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0] != rel || res.Messages.Local == 0 || res.Messages.All == 0 || !res.ViewsDropped {
		t.Fatalf("erase on A: %+v", res)
	}
	if left := leftOf(t, a, sid); left != "" {
		t.Fatalf("A keeps %s", left)
	}
	// B applies the erase event.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		left := leftOf(t, b, sid)
		return left == "", "B keeps " + left
	})
	for _, p := range []string{trashCopy, staged} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("B's copy %s: %v", p, err)
		}
	}
	// A's own erase event came back (its PI_ALL is clean up to it too).
	waitUntil(t, 30*time.Second, func() (bool, string) {
		left := leftOf(t, a, sid)
		return left == "", "A keeps " + left
	})
	for _, s := range []*station{a, b} {
		waitSearch(t, s, 0, leaked)
		waitSearch(t, s, 0, "--session", sid)
		waitSearch(t, s, 2, "--session", "0199ffff-0000-7000-8000-000000000002") // the other session stays
	}
	sa, err := a.status()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.status()
	if err != nil {
		t.Fatal(err)
	}
	if sa.Erased != 1 || sb.Erased != 0 || sb.Replicator.Erased != 1 || sa.Replicator.Erased != 0 {
		t.Errorf("erased: A %d here, %d for others; B %d here, %d for others", sa.Erased, sa.Replicator.Erased, sb.Erased, sb.Replicator.Erased)
	}
	if sa.Projection.Erased != 1 || sb.Projection.Erased != 1 {
		t.Errorf("views dropped: A %d, B %d", sa.Projection.Erased, sb.Projection.Erased)
	}
	for name, want := range map[string]float64{
		"pisyncd_sessions_erased_total":            float64(sa.Erased),
		"pisyncd_replica_sessions_erased_total":    float64(sa.Replicator.Erased),
		"pisyncd_projection_sessions_erased_total": float64(sa.Projection.Erased),
	} {
		if got := metricValue(t, a, name); got != want {
			t.Errorf("A: %s = %v, status says %v", name, got, want)
		}
	}
	if got := metricValue(t, b, "pisyncd_replica_sessions_erased_total"); got != 1 {
		t.Errorf("B: pisyncd_replica_sessions_erased_total = %v", got)
	}
	if st := b.d.tailer.Stats(); st.FilesDeleted != 0 {
		t.Errorf("B's tailer took the erase for %d deletion(s)", st.FilesDeleted)
	}

	// `pisyncd hub erase` on the hub node: only the erase event stays.
	var out bytes.Buffer
	if err := hubEraseCommand([]string{sid, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var hres []hubEraseResult
	if err := json.Unmarshal(out.Bytes(), &hres); err != nil || len(hres) != 1 || hres[0].Messages == 0 || hres[0].Error != "" {
		t.Fatalf("hub erase: %s (%v)", out.Bytes(), err)
	}
	if total, events := hub.hubLines(t, sid); total != 1 || events != 1 {
		t.Errorf("PI_HUB holds %d messages of the session, %d of them erase events; want the erase event only", total, events)
	}
	// A session the hub holds nothing of: the error says where a sealed
	// session's lines are.
	if err := hubEraseCommand([]string{"0199ffff-0000-7000-8000-0000000000ff"}, &out); err == nil || !strings.Contains(err.Error(), "pisyncd key token 0199ffff-0000-7000-8000-0000000000ff") {
		t.Errorf("hub erase of a session the hub holds nothing of: %v", err)
	}

	// Both keep working.
	later := writeSentinel(t, a, "0199ffff-0000-7000-8000-000000000003")
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[later]) == 2, "a new session on B" })

	// A restart brings nothing back.
	for _, s := range []*station{a, b} {
		s.stop()
		s.start()
	}
	againSID := "0199ffff-0000-7000-8000-000000000004"
	again := writeSentinel(t, b, againSID)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(a.sessionFiles()[again]) == 2, "a session from B on A after the restart"
	})
	for _, s := range []*station{a, b} {
		select {
		case <-s.d.proj.Ready():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: projection not ready", s.name)
		}
		waitUntil(t, 10*time.Second, func() (bool, string) {
			cat, _ := s.d.proj.Catalog(ctx)
			for _, c := range cat {
				if c.SessionID == againSID {
					return true, ""
				}
			}
			var ids []string
			for _, c := range cat {
				ids = append(ids, c.SessionID)
			}
			return false, fmt.Sprintf("%s: the new session is not in the catalog yet: %v, %+v", s.name, ids, s.d.proj.Stats())
		})
		if left := leftOf(t, s, sid); left != "" {
			t.Errorf("%s keeps after a restart: %s", s.name, left)
		}
		if n := len(s.sessionFiles()[other]); n != 2 {
			t.Errorf("%s: the other session has %d lines", s.name, n)
		}
	}

	// The secret is in no file of either machine, nor of the hub.
	for _, s := range []*station{a, b} {
		s.stop()
	}
	hub.stop()
	for _, dir := range []string{a.cfg.StateDir, b.cfg.StateDir, a.cfg.SessionsDir, b.cfg.SessionsDir, hub.dir} {
		if hits := grepTree(dir, leaked); len(hits) > 0 {
			t.Errorf("the secret is still in %v", hits)
		}
	}
}

// stationEnv points the commands that read the environment (config.Load)
// at a station's settings.
func stationEnv(t *testing.T, cfg *config.Config) {
	t.Setenv("PISYNC_SESSIONS_DIR", cfg.SessionsDir)
	t.Setenv("PISYNC_STATE_DIR", cfg.StateDir)
	t.Setenv("PISYNC_NODE_ID", cfg.NodeID)
	t.Setenv("PISYNC_HUB_URLS", strings.Join(cfg.HubURLs, ","))
}

// TestEraseSaysHubOfTheDaemon: erase through a running daemon that has a
// hub says the event goes there and what to run on the hub, also from a
// shell without PISYNC_HUB_URLS (before, it said nothing of the hub).
func TestEraseSaysHubOfTheDaemon(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-000000000012"
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, sessionRel("/work/e", sid)), []string{hdrLine(sid, "/work/e"), msgLine("e1", "", "hello")})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := a.status()
		return err == nil && st.Stream.Messages == 2, fmt.Sprintf("PI_LOCAL: %+v %v", st.Stream, err)
	})
	var out bytes.Buffer

	// On B, which only holds a copy, erase says its event will be refused
	// elsewhere and where to erase instead. Before, it promised that every
	// machine would erase its copy, and to run hub erase.
	b := newStation(t, "ws-b", hub.url(), "")
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[sessionRel("/work/e", sid)]) == 2, "B's copy" })
	stationEnv(t, b.cfg)
	if err := eraseCommand([]string{sid, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var res eraseResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.CopyOnly {
		t.Errorf("erase --json on a machine with a copy: %v\n%s", err, out.String())
	}
	out.Reset()
	sid2 := "0199ffff-0000-7000-8000-000000000013"
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, sessionRel("/work/e", sid2)), []string{hdrLine(sid2, "/work/e"), msgLine("e1", "", "hello")})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[sessionRel("/work/e", sid2)]) == 2, "B's copy" })
	if err := eraseCommand([]string{sid2}, &out); err != nil || strings.Contains(out.String(), "every machine of the team erases") || !strings.Contains(out.String(), "on a machine that wrote it") {
		t.Errorf("erase on a machine with a copy: %v\n%s", err, out.String())
	}

	out.Reset()
	stationEnv(t, a.cfg)
	t.Setenv("PISYNC_HUB_URLS", "")
	if err := eraseCommand([]string{sid}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "goes to the hub") || !strings.Contains(out.String(), "pisyncd hub erase "+sid) {
		t.Errorf("erase through a daemon with a hub, from a shell without one:\n%s", out.String())
	}
}

// TestEraseWithoutDaemon: `pisyncd erase` with no daemon running erases on
// the store itself; when the daemon starts, its views drop the session and
// the erase event reaches the other machine, which erases its copy.
func TestEraseWithoutDaemon(t *testing.T) {
	hub := startTestHub(t)
	a := newStationWith(t, "ws-a", hub.url(), "", func(c *config.Config) { c.Search = "on" })
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-000000000011"
	rel := sessionRel("/work/offline", sid)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel), []string{hdrLine(sid, "/work/offline"), msgLine("e1", "", "key "+leaked)})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 2, "B's copy" })
	ownSubject := eventlog.AllSubject("ws-a", sid)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := allCount(t, a, ownSubject)
		return n == 2, fmt.Sprintf("A's PI_ALL holds %d of its own lines", n)
	})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		left, err := a.d.searchW.Unindexed(context.Background())
		return err == nil && left == 0 && len(grepTree(filepath.Join(a.cfg.StateDir, "search"), leaked)) > 0, fmt.Sprintf("A's search index: %d unindexed (%v)", left, err)
	})
	a.stop()

	stationEnv(t, a.cfg)
	ctx := context.Background()
	var out bytes.Buffer
	if err := eraseCommand([]string{sid, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var res eraseResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || !res.Offline || len(res.Files) != 1 || res.Messages.Local != 2 {
		t.Fatalf("erase without a daemon: %s (%v)", out.Bytes(), err)
	}
	if err := eraseCommand([]string{sid}, &out); !errors.Is(err, errNothingToErase) || !strings.Contains(err.Error(), "erased here already") {
		t.Fatalf("a second erase: %v, want %v, saying it was erased already", err, errNothingToErase)
	}
	// Gone from the state dir now, not at the next start (before, the
	// search index and the views held it until then, which may be never).
	if hits := grepTree(a.cfg.StateDir, leaked); len(hits) > 0 {
		t.Errorf("with the daemon stopped, the erased secret is still in %v", hits)
	}
	out.Reset()
	if err := lsCommand(nil, &out); err != nil || strings.Contains(out.String(), sid) {
		t.Errorf("ls after an erase without a daemon: %v\n%s", err, out.String())
	}

	a.start()
	for _, s := range []*station{a, b} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			left := leftOf(t, s, sid)
			return left == "", s.name + " keeps " + left
		})
	}
	// A's erase event is back from the hub, and nothing else was copied
	// again: not the erased lines, which the hub still holds.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		all, err := a.d.log.JetStream().Stream(ctx, eventlog.AllStream)
		if err != nil {
			return false, err.Error()
		}
		for seq := uint64(1); ; {
			m, err := all.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(ownSubject))
			if err != nil {
				return false, "A's erase event is not back from the hub"
			}
			if m.Header.Get(eventlog.HdrSrcSeq) != "" {
				return true, ""
			}
			seq = m.Sequence + 1
		}
	})
	if st, err := a.status(); err != nil || st.Downloader.Copied != 1 {
		t.Errorf("A's downloader copied %+v (%v) after the restart, want the erase event only", st.Downloader, err)
	}
	for _, s := range []*station{a, b} {
		s.stop()
		if hits := grepTree(s.cfg.StateDir, leaked); len(hits) > 0 {
			t.Errorf("the secret is still in %v", hits)
		}
	}
}

// TestEraseUpgradesOldStore: a store an older pisyncd made (PI_LOCAL
// denies deleting messages, which nats-server will not lift in place) is
// upgraded when the daemon starts: every line stays, at its sequence, the
// tailer publishes nothing again, and erase then works and leaves no copy
// of the secret in the store.
func TestEraseUpgradesOldStore(t *testing.T) {
	cfg := stationConfig(t, "ws-old", "")
	cfg.HubURLs = nil
	sid := "0199ffff-0000-7000-8000-000000000021"
	rel := sessionRel("/work/old", sid)
	raw := []string{hdrLine(sid, "/work/old"), msgLine("e1", "", "hello"), msgLine("e2", "e1", "key "+leaked)}
	mustWriteLines(t, filepath.Join(cfg.SessionsDir, rel), raw)

	// What the older daemon left: its PI_LOCAL, with the file's lines.
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Config{StateDir: cfg.StateDir, NodeID: cfg.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	old := eventlog.LocalStreamConfig()
	old.DenyDelete = true
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	var lines []eventlog.Line
	off := int64(0)
	for _, r := range raw {
		l := session.ParseLine([]byte(r))
		off += int64(len(r)) + 1
		lines = append(lines, eventlog.NewLine([]byte(r), l.ID, l.ParentID, l.Type, rel, off))
	}
	last, _, err := eventlog.NewPublisher(nc, js, 0).Publish(ctx, eventlog.LocalSubject(cfg.NodeID, sid), 0, lines)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	s := runStation(t, cfg)
	select {
	case <-s.d.tailer.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("tailer not ready")
	}
	st, err := s.d.log.Stream().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Config.DenyDelete || st.State.LastSeq != last || st.State.Msgs != 3 {
		t.Fatalf("after the upgrade: deny_delete %v, last seq %d (want %d), %d messages", st.Config.DenyDelete, st.State.LastSeq, last, st.State.Msgs)
	}
	if p := s.d.tailer.Stats().LinesPublished; p != 0 {
		t.Errorf("the tailer published %d lines again", p)
	}
	if _, err := eraseViaDaemon(ctx, cfg, sid); err != nil {
		t.Fatal(err)
	}
	if left := leftOf(t, s, sid); left != "" {
		t.Fatalf("keeps %s", left)
	}
	s.stop()
	if hits := grepTree(cfg.StateDir, leaked); len(hits) > 0 {
		t.Errorf("the secret is still in %v", hits)
	}
}

// TestHubUpgradeAndErase: a PI_HUB an older pisyncd made denies deleting
// messages. A hub node that is part of a cluster keeps it so (the other
// settings brought up to date) and `hub erase` says to upgrade; `pisyncd
// hub upgrade` upgrades it (every message kept) and `hub erase` works; a
// single hub node upgrades it itself when it starts.
func TestHubUpgradeAndErase(t *testing.T) {
	hub := startTestHub(t)
	startHubControl(t, hub)
	ctx := context.Background()
	sid := "0199ffff-0000-7000-8000-000000000031"
	oldHub := func() uint64 {
		t.Helper()
		nc, err := hub.srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		if err := js.DeleteStream(ctx, eventlog.HubStream); err != nil {
			t.Fatal(err)
		}
		old := eventlog.HubStreamConfig(1)
		old.DenyDelete = true
		if _, err := js.CreateStream(ctx, old); err != nil {
			t.Fatal(err)
		}
		pub := eventlog.NewPublisher(nc, js, 0)
		l := eventlog.NewLine([]byte(msgLine("e1", "", "key "+leaked)), "e1", "", "message", "p/f.jsonl", 1)
		last, _, err := pub.Publish(ctx, eventlog.UpSubject("ws-a", sid), 0, []eventlog.Line{l})
		if err != nil {
			t.Fatal(err)
		}
		if last, _, err = pub.Publish(ctx, eventlog.UpSubject("ws-a", sid), last, []eventlog.Line{eventlog.EraseLine("p/f.jsonl", time.Now())}); err != nil {
			t.Fatal(err)
		}
		return last
	}
	denies := func() bool {
		t.Helper()
		nc, _ := hub.srv.Connect()
		defer nc.Close()
		js, _ := jetstream.New(nc)
		s, err := js.Stream(ctx, eventlog.HubStream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.DenyDelete
	}

	oldHub()
	if err := ensureTeams(ctx, hub.srv, &config.Hub{Replicas: 1}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("a cluster node's start with an old PI_HUB: %v", err)
	}
	var out bytes.Buffer
	if err := hubEraseCommand([]string{sid}, &out); err == nil || !strings.Contains(err.Error(), "pisyncd hub upgrade") {
		t.Fatalf("hub erase on an old PI_HUB: %v", err)
	}
	out.Reset()
	if err := hubUpgradeCommand(nil, &out); err != nil || !strings.Contains(out.String(), "PI_HUB upgraded in the account of") {
		t.Fatalf("hub upgrade: %v: %s", err, out.String())
	}
	// Again: nothing to do, and it says so (before: "upgraded" each time).
	out.Reset()
	if err := hubUpgradeCommand(nil, &out); err != nil || !strings.Contains(out.String(), "PI_HUB is up to date in every team's account") {
		t.Fatalf("hub upgrade again: %v: %s", err, out.String())
	}
	if denies() {
		t.Fatal("PI_HUB still denies deletes after hub upgrade")
	}
	if total, events := hub.hubLines(t, sid); total != 2 || events != 1 {
		t.Fatalf("after the upgrade PI_HUB holds %d messages of the session (%d erase events), want 2 (1)", total, events)
	}
	if err := hubEraseCommand([]string{sid}, &out); err != nil {
		t.Fatal(err)
	}
	if total, events := hub.hubLines(t, sid); total != 1 || events != 1 {
		t.Fatalf("after hub erase PI_HUB holds %d messages of the session (%d erase events)", total, events)
	}

	oldHub()
	hub.stop()
	hub.start()
	if denies() {
		t.Fatal("a single hub node did not upgrade PI_HUB when it started")
	}
	if total, _ := hub.hubLines(t, sid); total != 2 {
		t.Fatalf("after the upgrade at start PI_HUB holds %d messages of the session, want 2", total)
	}
}

// TestHubDocStreamSettings: the PI_HUB and PI_KEYS settings docs/HUB.md tells the
// operator of a stock server to create are eventlog.HubStreamConfig.
func TestHubDocStreamSettings(t *testing.T) {
	var doc jetstream.StreamConfig
	if err := json.Unmarshal(docStreamJSON(t), &doc); err != nil {
		t.Fatal(err)
	}
	want := eventlog.HubStreamConfig(1)
	if !reflect.DeepEqual(doc, want) {
		t.Fatalf("docs/HUB.md's PI_HUB differs from eventlog.HubStreamConfig:\n doc %+v\ncode %+v", doc, want)
	}
	var keys jetstream.StreamConfig
	if err := json.Unmarshal(docFileJSON(t, "pi_keys.json"), &keys); err != nil {
		t.Fatal(err)
	}
	if want := eventlog.KeysStreamConfig(1); !reflect.DeepEqual(keys, want) {
		t.Fatalf("docs/HUB.md's PI_KEYS differs from eventlog.KeysStreamConfig:\n doc %+v\ncode %+v", keys, want)
	}
}

// allCount counts a station's PI_ALL messages on filter.
func allCount(t *testing.T, s *station, filter string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := subjectsCount(ctx, s.d.log.JetStream(), eventlog.AllStream, filter)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEraseThenWriteAgain: a session erased everywhere (hub included) and
// then written again under the same id is a new session from then on: it
// replicates, its views hold the new lines only, and a restart does not
// take the old erase event for a new one.
func TestEraseThenWriteAgain(t *testing.T) {
	hub := startTestHub(t)
	startHubControl(t, hub)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199ffff-0000-7000-8000-000000000041"
	rel := sessionRel("/work/again", sid)
	aPath, bPath := filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, []string{hdrLine(sid, "/work/again"), msgLine("e1", "", "key "+leaked)})
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[rel]) == 2, "B's copy" })
	if _, err := eraseViaDaemon(context.Background(), a.cfg, sid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		left := leftOf(t, b, sid)
		return left == "", "B keeps " + left
	})
	var out bytes.Buffer
	if err := hubEraseCommand([]string{sid}, &out); err != nil {
		t.Fatal(err)
	}

	// pi writes the session again (a new file: new lines, nothing of the old).
	again := []string{testenv.HeaderAt(sid, "/work/again", "2026-12-01T00:00:00.000Z"), msgLine("n1", "", "a fresh start")}
	mustWriteLines(t, aPath, again)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got := b.sessionFiles()[rel]
		return reflect.DeepEqual(got, again), fmt.Sprintf("B's file: %q", got)
	})
	entries := func(s *station) (int, string) {
		cat, err := s.d.proj.Catalog(context.Background())
		if err != nil {
			return 0, err.Error()
		}
		for _, c := range cat {
			if c.SessionID == sid {
				return c.Entries, ""
			}
		}
		return 0, "not in the catalog"
	}
	for _, s := range []*station{a, b} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			n, why := entries(s)
			return n == 1, fmt.Sprintf("%s: %d entries %s", s.name, n, why)
		})
	}
	for _, s := range []*station{a, b} {
		s.stop()
		s.start()
	}
	appendLine(t, bPath, msgLine("n2", "n1", "continued on B"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got := a.sessionFiles()[rel]
		return len(got) == 3, fmt.Sprintf("A's file: %q", got)
	})
	for _, s := range []*station{a, b} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			n, why := entries(s)
			return n == 2, fmt.Sprintf("%s: %d entries %s", s.name, n, why)
		})
	}

	// B reads PI_ALL again from its start, as it does after a restart
	// when its position was held before the erase event (a line that
	// waits for ever for its header held it there): the erase, applied
	// once, is not applied again. Before, B unlinked its file, erased its
	// own line n2 from its log and made the file again from A's lines.
	b.stop()
	d, err := OpenStore(context.Background(), b.cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := d.log.JetStream().KeyValue(context.Background(), eventlog.StateBucket)
	if err == nil {
		err = kv.Delete(context.Background(), "replicator.position")
	}
	if cerr := d.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	b.start()
	appendLine(t, aPath, msgLine("n3", "n2", "continued on A"))
	want := append(again, msgLine("n2", "n1", "continued on B"), msgLine("n3", "n2", "continued on A"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got := b.sessionFiles()[rel]
		return reflect.DeepEqual(got, want), fmt.Sprintf("B's file: %q", got)
	})
	for _, s := range []*station{a, b} {
		s.stop()
		if hits := grepTree(s.cfg.StateDir, leaked); len(hits) > 0 {
			t.Errorf("the secret is still in %v", hits)
		}
	}
}

// eraseWhenPublished erases sid on station s once its tailer has published
// n lines.
func eraseWhenPublished(t *testing.T, s *station, sid string, n int64) *eraseResult {
	t.Helper()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := s.status()
		return err == nil && st.Tailer.LinesPublished == n, fmt.Sprintf("%+v %v", st.Tailer, err)
	})
	res, err := s.d.eraseSession(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestEraseNamesLinkTarget: a session file that is a link to a file
// elsewhere (pi follows such links) is unlinked, and erase says that the
// file it pointed at stays, by its path, instead of reporting the session's
// file gone while the secret is still on disk.
func TestEraseNamesLinkTarget(t *testing.T) {
	cfg := stationConfig(t, "ws-link", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	sid := "0199ffff-0000-7000-8000-000000000021"
	target := filepath.Join(t.TempDir(), "outside.jsonl")
	mustWriteLines(t, target, []string{hdrLine(sid, "/work/link"), msgLine("e1", "", "key "+leaked)})
	link := filepath.Join(cfg.SessionsDir, sessionRel("/work/link", sid))
	os.MkdirAll(filepath.Dir(link), 0o700)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	res := eraseWhenPublished(t, s, sid, 2)
	if len(res.Files) != 1 || len(res.LinkTargets) != 1 || res.LinkTargets[0] != target {
		t.Errorf("erase: files %v, link targets %v, want the link and %s", res.Files, res.LinkTargets, target)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the link: %v", err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the target went too: %v", err)
	}
}

// TestEraseNamesHardLinks: a session file with another name (a hard link
// outside the sessions dir) keeps its lines under that name after the
// erase unlinks the session's; erase says so, and how many names are
// left, where it said nothing (a probe, 2026-12-06).
func TestEraseNamesHardLinks(t *testing.T) {
	cfg := stationConfig(t, "ws-hard", "")
	cfg.HubURLs = nil
	s := runStation(t, cfg)
	sid := "0199ffff-0000-7000-8000-000000000022"
	path := filepath.Join(cfg.SessionsDir, sessionRel("/work/hard", sid))
	mustWriteLines(t, path, []string{hdrLine(sid, "/work/hard"), msgLine("e1", "", "key "+leaked)})
	if err := os.Link(path, filepath.Join(t.TempDir(), "backup.jsonl")); err != nil {
		t.Fatal(err)
	}
	res := eraseWhenPublished(t, s, sid, 2)
	if len(res.Files) != 1 || len(res.HardLinked) != 1 || res.HardLinked[0].File != res.Files[0] || res.HardLinked[0].Others != 1 {
		t.Errorf("erase: files %v, hard linked %+v, want the file with 1 other name", res.Files, res.HardLinked)
	}
}
