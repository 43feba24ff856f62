package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/replicate"
)

// Helpers shared by the replication tests of this file and
// replication_pi_test.go. The cluster helpers (startTestHub, newStation,
// waitUntil, …) are in cluster_test.go.

// newStationWith is newStation with a hook that adjusts the config before
// the daemon starts (for example Delete: "ignore").
func newStationWith(t *testing.T, name, hubURL, pathMap string, adjust func(*config.Config)) *station {
	cfg := stationConfig(t, name, hubURL)
	cfg.PathMap = pathMap
	if adjust != nil {
		adjust(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: config: %v", name, err)
	}
	s := &station{t: t, name: name, cfg: cfg}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// status asks the running daemon over its control socket, as `pisyncd
// status` does. Unlike reading s.d's fields, this is race-free while the
// daemon runs.
func (s *station) status() (Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := getControl(ctx, s.cfg, "/status")
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// hubCounts returns how many messages PI_HUB holds on the subjects matching
// filter (e.g. "pi.up.ws-b.>"), read on the hub itself.
func (h *testHub) count(filter string) (uint64, error) {
	if h.srv == nil {
		return 0, fmt.Errorf("hub is down")
	}
	nc, err := h.srv.Connect()
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return subjectsCount(ctx, js, eventlog.HubStream, filter)
}

// subjectsCount counts stream's messages on the subjects matching filter: a
// stream info's subject filter narrows the subjects it lists, not its
// count of messages.
func subjectsCount(ctx context.Context, js jetstream.JetStream, stream, filter string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// waitHub waits until PI_HUB holds want messages on filter.
func (h *testHub) waitCount(t *testing.T, d time.Duration, filter string, want uint64) {
	t.Helper()
	waitUntil(t, d, func() (bool, string) {
		n, err := h.count(filter)
		return err == nil && n == want, fmt.Sprintf("hub holds %d messages on %s, want %d (%v)", n, filter, want, err)
	})
}

// writeLines appends lines with one O_APPEND write, as pi writes a new
// session's first batch. It returns an error rather than failing, so that
// writer goroutines can use it.
func writeLines(path string, lines []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func mustWriteLines(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := writeLines(path, lines); err != nil {
		t.Fatal(err)
	}
}

// writeSentinel writes a new two-line session on s and returns its file,
// relative to a sessions dir. Events reach every PI_ALL in hub order, so
// once another station has this file it has applied everything s
// published before it.
func writeSentinel(t *testing.T, s *station, sid string) string {
	t.Helper()
	rel := sessionRel("/work/sentinel", sid)
	mustWriteLines(t, filepath.Join(s.cfg.SessionsDir, rel), []string{hdrLine(sid, "/work/sentinel"), msgLine("s", "", "after")})
	return rel
}

// sessionRel is the file of a session, relative to a sessions dir, as the
// tests here name them.
func sessionRel(cwd, sid string) string {
	return replicate.CwdFolder(cwd) + "/2026-11-30T00-00-00-000Z_" + sid + ".jsonl"
}

// chain builds n message lines, each the child of the one before; the first
// is a child of parent ("" for a root).
func chain(prefix, parent string, n int, text string) []string {
	out := make([]string, n)
	for i := range out {
		id := fmt.Sprintf("%s%05d", prefix, i)
		out[i] = msgLine(id, parent, fmt.Sprintf("%s %d %s", prefix, i, text))
		parent = id
	}
	return out
}

// duplicates lists the lines that a file holds more than once.
func duplicates(lines []string) []string {
	seen := map[string]int{}
	var dup []string
	for _, l := range lines {
		if seen[l]++; seen[l] == 2 {
			dup = append(dup, l)
		}
	}
	return dup
}

// sameEntries reports whether every station holds the same files, each with
// the same set of entry lines (headers aside), of the expected sizes, and
// describes the first difference.
func sameEntries(want map[string]int, stations ...*station) (bool, string) {
	for _, s := range stations {
		files := s.sessionFiles()
		if len(files) != len(want) {
			return false, fmt.Sprintf("%s holds %d files, want %d", s.name, len(files), len(want))
		}
		for rel, n := range want {
			if got := len(lineSet(files[rel])); got != n {
				return false, fmt.Sprintf("%s: %s holds %d entries, want %d", s.name, rel, got, n)
			}
		}
	}
	ref := stations[0].sessionFiles()
	for _, s := range stations[1:] {
		files := s.sessionFiles()
		for rel := range want {
			if !reflect.DeepEqual(lineSet(ref[rel]), lineSet(files[rel])) {
				return false, fmt.Sprintf("%s and %s differ on %s", stations[0].name, s.name, rel)
			}
		}
	}
	return true, ""
}

// TestStationStoppedMidCatchUp: B is down while A writes a backlog (2000
// entries to a session B already holds, 500 to a new one). B restarts and
// is stopped again while it is still writing the backlog, as often as the
// backlog lasts; in the end each of B's files holds every line exactly once
// and B has published nothing of its own.
func TestStationStoppedMidCatchUp(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")

	const big, small = 2000, 500
	sid1, sid2 := "0199dddd-0000-7000-8000-000000000001", "0199dddd-0000-7000-8000-000000000002"
	rel1, rel2 := sessionRel("/work/big", sid1), sessionRel("/work/new", sid2)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel1), []string{hdrLine(sid1, "/work/big"), msgLine("root", "", "start")})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n := len(b.sessionFiles()[rel1])
		return n == 2, fmt.Sprintf("B's copy has %d lines", n)
	})

	b.stop()
	backlog := chain("e", "root", big, strings.Repeat("backlog ", 20))
	for i := 0; i < big; i += 100 {
		mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel1), backlog[i:i+100])
	}
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel2), append([]string{hdrLine(sid2, "/work/new")}, chain("n", "", small, "new session")...))
	hub.waitCount(t, 60*time.Second, "pi.up.ws-a.>", 2+big+1+small)

	want := map[string]int{rel1: 1 + big, rel2: small}
	var progress []int
	for round := 0; ; round++ {
		b.start()
		before := len(b.sessionFiles()[rel1]) + len(b.sessionFiles()[rel2])
		if round == 5 {
			break // enough interruptions: let it finish
		}
		done := false
		waitUntil(t, 60*time.Second, func() (bool, string) {
			now := len(b.sessionFiles()[rel1]) + len(b.sessionFiles()[rel2])
			done, _ = sameEntries(want, a, b)
			return done || now > before, fmt.Sprintf("B holds %d lines, had %d", now, before)
		})
		if done {
			break
		}
		b.stop() // in the middle of the backlog
		progress = append(progress, len(b.sessionFiles()[rel1])+len(b.sessionFiles()[rel2]))
	}
	t.Logf("B stopped %d times during its catch-up, holding %v lines of %d", len(progress), progress, 2+big+1+small)
	// The deadline is generous: a restarted mirror may wait out its
	// stalled flow control, or nats-server's consumer-setup backoff.
	waitUntil(t, 3*time.Minute, func() (bool, string) { return sameEntries(want, a, b) })

	af, bf := a.sessionFiles(), b.sessionFiles()
	for rel := range want {
		if d := duplicates(bf[rel]); len(d) > 0 {
			t.Errorf("B's %s holds %d lines twice, e.g. %s", rel, len(d), d[0])
		}
		if !reflect.DeepEqual(af[rel], bf[rel]) {
			// Single writer, no mapping: even the order is A's.
			t.Errorf("B's %s differs from A's (%d vs %d lines)", rel, len(bf[rel]), len(af[rel]))
		}
	}
	// B must not have taken the replicated lines for its own: wait until
	// its tailer has rescanned a few times, then look at the hub.
	st0, err := b.status()
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Tailer.Rescans >= st0.Tailer.Rescans+3, "B's rescans"
	})
	if n, err := hub.count("pi.up.ws-b.>"); err != nil || n != 0 {
		t.Fatalf("B published %d lines of its own (%v), want 0", n, err)
	}
}

// TestThreeStationsConverge: A, B and C write concurrently to one shared
// session (each its own branch off the same root) and each to a session of
// its own; all three end with the same files holding the same entries,
// each line once.
func TestThreeStationsConverge(t *testing.T) {
	hub := startTestHub(t)
	stations := []*station{
		newStation(t, "ws-a", hub.url(), ""),
		newStation(t, "ws-b", hub.url(), ""),
		newStation(t, "ws-c", hub.url(), ""),
	}
	shared := "0199eeee-0000-7000-8000-000000000000"
	relShared := sessionRel("/work/shared", shared)
	mustWriteLines(t, filepath.Join(stations[0].cfg.SessionsDir, relShared), []string{hdrLine(shared, "/work/shared"), msgLine("root", "", "start")})
	waitUntil(t, 30*time.Second, func() (bool, string) {
		for _, s := range stations {
			if len(s.sessionFiles()[relShared]) != 2 {
				return false, s.name + " has no copy yet"
			}
		}
		return true, ""
	})

	const perShared, perOwn = 60, 40
	want := map[string]int{relShared: 1 + 3*perShared}
	var wg sync.WaitGroup
	for i, s := range stations {
		own := fmt.Sprintf("0199eeee-0000-7000-8000-00000000000%d", i+1)
		relOwn := sessionRel("/work/"+s.name, own)
		want[relOwn] = perOwn
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := chain(s.name+"-", "root", perShared, "on the shared session")
			theirs := chain(s.name+"-own-", "", perOwn, "on my session")
			ownPath := filepath.Join(s.cfg.SessionsDir, relOwn)
			if err := writeLines(ownPath, []string{hdrLine(own, "/work/"+s.name)}); err != nil {
				t.Error(err)
				return
			}
			// Interleave, one line per write, as pi appends.
			for j := 0; j < perShared; j++ {
				if err := writeLines(filepath.Join(s.cfg.SessionsDir, relShared), mine[j:j+1]); err != nil {
					t.Error(err)
					return
				}
				if j < perOwn {
					if err := writeLines(ownPath, theirs[j:j+1]); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitUntil(t, 90*time.Second, func() (bool, string) { return sameEntries(want, stations...) })
	for _, s := range stations {
		for rel, lines := range s.sessionFiles() {
			if d := duplicates(lines); len(d) > 0 {
				t.Errorf("%s: %s holds %d lines twice, e.g. %s", s.name, rel, len(d), d[0])
			}
			if len(lines) == 0 || !strings.Contains(lines[0], `"type":"session"`) {
				t.Errorf("%s: %s does not start with its header", s.name, rel)
			}
		}
	}
	// Each node published its own lines only: header + root from A, and
	// per node its shared branch, its own session and its header.
	for i, s := range stations {
		wantN := uint64(perShared + 1 + perOwn)
		if i == 0 {
			wantN += 2
		}
		hub.waitCount(t, 10*time.Second, "pi.up."+s.name+".>", wantN)
	}
}

// TestRemoteDeletion: deleting a session's file on A moves B's copy into
// SESSIONS_DIR/.pisyncd-trash (byte for byte, never unlinked), leaves C's
// copy alone (PISYNC_DELETE=ignore), and a restart of B does not bring the
// deleted session back.
func TestRemoteDeletion(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	c := newStationWith(t, "ws-c", hub.url(), "", func(c *config.Config) { c.Delete = "ignore" })

	sid := "0199ffff-0000-7000-8000-000000000001"
	rel := sessionRel("/work/gone", sid)
	aPath := filepath.Join(a.cfg.SessionsDir, rel)
	mustWriteLines(t, aPath, append([]string{hdrLine(sid, "/work/gone")}, chain("d", "", 10, "doomed")...))
	var copyB []byte
	waitUntil(t, 30*time.Second, func() (bool, string) {
		copyB, _ = os.ReadFile(filepath.Join(b.cfg.SessionsDir, rel))
		nc := len(c.sessionFiles()[rel])
		return len(splitLines(string(copyB))) == 11 && nc == 11, fmt.Sprintf("B %d lines, C %d", len(splitLines(string(copyB))), nc)
	})

	if err := os.Remove(aPath); err != nil {
		t.Fatal(err)
	}
	trash := filepath.Join(b.cfg.SessionsDir, replicate.TrashDir)
	var trashed []string
	waitUntil(t, 30*time.Second, func() (bool, string) {
		trashed, _ = filepath.Glob(filepath.Join(trash, "*"))
		_, err := os.Stat(filepath.Join(b.cfg.SessionsDir, rel))
		return len(trashed) == 1 && os.IsNotExist(err), fmt.Sprintf("B's trash %v, copy: %v", trashed, err)
	})
	if got, _ := os.ReadFile(trashed[0]); string(got) != string(copyB) {
		t.Errorf("the trashed copy differs from B's file")
	}
	if !strings.HasSuffix(trashed[0], "_"+strings.ReplaceAll(rel, "/", "_")) {
		t.Errorf("trash name %s does not end in the file's path", filepath.Base(trashed[0]))
	}
	if st, err := os.Stat(trash); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("trash folder: %v %v", st.Mode(), err)
	}

	// The tombstone is on the hub now: a session A writes after it reaches
	// C's PI_ALL behind it, so once C has that one, C has seen the
	// tombstone, and ignored it.
	relS1 := writeSentinel(t, a, "0199ffff-0000-7000-8000-000000000002")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return len(c.sessionFiles()[relS1]) == 2 && len(b.sessionFiles()[relS1]) == 2, "sentinel on B and C"
	})
	if got := c.sessionFiles()[rel]; len(got) != 11 {
		t.Errorf("C (delete: ignore) lost its copy: %d lines", len(got))
	}
	if _, err := os.Stat(filepath.Join(c.cfg.SessionsDir, replicate.TrashDir)); !os.IsNotExist(err) {
		t.Errorf("C has a trash folder: %v", err)
	}

	// B replays its PI_ALL from its saved position on a restart; the
	// deleted session stays deleted, and nothing was published by B or C
	// (a copy moved to the trash is no deletion of B's own).
	b.stop()
	b.start()
	relS2 := writeSentinel(t, a, "0199ffff-0000-7000-8000-000000000003")
	waitUntil(t, 30*time.Second, func() (bool, string) { return len(b.sessionFiles()[relS2]) == 2, "second sentinel on B" })
	if _, err := os.Stat(filepath.Join(b.cfg.SessionsDir, rel)); !os.IsNotExist(err) {
		t.Errorf("the deleted session came back on B: %v", err)
	}
	for _, node := range []string{"ws-b", "ws-c"} {
		if n, err := hub.count("pi.up." + node + ".>"); err != nil || n != 0 {
			t.Errorf("%s published %d messages (%v), want 0", node, n, err)
		}
	}
	st, err := b.status()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("B's replicator after restart: %+v", *st.Replicator)
}

// TestStationStartsWhileHubDown: the hub goes down after it has A's first
// lines; B starts for the first time while it is down; both keep working
// locally (A's tailer goes on publishing into PI_LOCAL); when the hub comes
// back, B receives A's session (old and offline lines) and A receives B's.
func TestStationStartsWhileHubDown(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	sidA, sidB := "0199abab-0000-7000-8000-00000000000a", "0199abab-0000-7000-8000-00000000000b"
	relA, relB := sessionRel("/work/a", sidA), sessionRel("/work/b", sidB)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, relA), append([]string{hdrLine(sidA, "/work/a")}, chain("a", "", 5, "online")...))
	hub.waitCount(t, 30*time.Second, "pi.up.ws-a.>", 6)

	hub.stop()
	b := newStation(t, "ws-b", hub.url(), "")
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, relA), chain("x", "a00004", 5, "offline"))
	mustWriteLines(t, filepath.Join(b.cfg.SessionsDir, relB), append([]string{hdrLine(sidB, "/work/b")}, chain("b", "", 5, "offline")...))
	// Local work goes on: both tailers publish into PI_LOCAL.
	for _, c := range []struct {
		s    *station
		want uint64
	}{{a, 11}, {b, 6}} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st, err := c.s.status()
			return err == nil && st.Stream.Messages == c.want, fmt.Sprintf("%s PI_LOCAL holds %d, want %d (%v)", c.s.name, st.Stream.Messages, c.want, err)
		})
	}
	if st, err := b.status(); err != nil || st.Forwarder == nil || st.Forwarder.Connected {
		t.Errorf("B's forwarder reports a hub while none runs: %+v %v", st.Forwarder, err)
	}
	// Either station's status says its link to the hub is down, A's
	// forwarder idle or not.
	hubLinked := func(s *station, want bool) {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st, err := s.status()
			return err == nil && st.HubLinked != nil && *st.HubLinked == want, fmt.Sprintf("%s: hub linked %v, want %v (%v)", s.name, st.HubLinked, want, err)
		})
	}
	hubLinked(a, false)
	hubLinked(b, false)

	hub.start()
	want := map[string]int{relA: 10, relB: 5}
	// PI_ALL's mirror retries its consumer with nats-server's backoff (5 s
	// × 2 × failures, up to 2 min), so this takes tens of seconds.
	waitUntil(t, 3*time.Minute, func() (bool, string) { return sameEntries(want, a, b) })
	hubLinked(a, true)
	hubLinked(b, true)
	for _, s := range []*station{a, b} {
		for rel, lines := range s.sessionFiles() {
			if d := duplicates(lines); len(d) > 0 {
				t.Errorf("%s: %s holds %d lines twice", s.name, rel, len(d))
			}
		}
	}
	hub.waitCount(t, 10*time.Second, "pi.up.ws-a.>", 11)
	hub.waitCount(t, 10*time.Second, "pi.up.ws-b.>", 6)
}
