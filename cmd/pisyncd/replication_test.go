package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
)

// TestReplicationRoundTrip: a session begun on A appears on B as a native
// file at the path pi would use there (cwd mapped), B continues it, and A's
// file receives B's lines; nothing is published twice. A's link to the
// hub has the default compression (auto: framed, not compressed, on a
// link this fast), B's is compressed whatever the link.
func TestReplicationRoundTrip(t *testing.T) {
	hub := startTestHub(t)
	a := newStationWith(t, "ws-a", hub.url(), "", func(c *config.Config) { c.HubCompression = "auto" })
	b := newStationWith(t, "ws-b", hub.url(), "/Users/ann=/home/ann", func(c *config.Config) { c.HubCompression = "fast" })
	for s, want := range map[*station]string{a: "s2_uncompressed", b: "s2_fast"} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			lz, err := s.d.srv.NATS().Leafz(nil)
			if err != nil || len(lz.Leafs) != 1 {
				return false, fmt.Sprintf("%s's leaf links: %v %+v", s.name, err, lz)
			}
			return lz.Leafs[0].Compression == want, fmt.Sprintf("%s's link to the hub compresses %q, want %q", s.name, lz.Leafs[0].Compression, want)
		})
	}

	sid := "0199bbbb-0000-7000-8000-000000000001"
	aPath := filepath.Join(a.cfg.SessionsDir, "--Users-ann-proj--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	appendLine(t, aPath, hdrLine(sid, "/Users/ann/proj"))
	appendLine(t, aPath, msgLine("e1", "", "hello from A"))
	appendLine(t, aPath, msgLine("e2", "e1", "reply on A"))

	bPath := filepath.Join(b.cfg.SessionsDir, "--home-ann-proj--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		b, err := os.ReadFile(bPath)
		return err == nil && len(splitLines(string(b))) == 3, fmt.Sprintf("B's file: %v %q", err, b)
	})
	got, _ := os.ReadFile(bPath)
	lines := splitLines(string(got))
	if lines[0] != hdrLine(sid, "/home/ann/proj") {
		t.Fatalf("B's header not mapped: %s", lines[0])
	}
	if lines[1] != msgLine("e1", "", "hello from A") || lines[2] != msgLine("e2", "e1", "reply on A") {
		t.Fatalf("B's entries differ: %q", lines)
	}
	if st, _ := os.Stat(bPath); st.Mode().Perm() != 0o600 {
		t.Errorf("replica mode %v, want 0600", st.Mode())
	}
	if st, _ := os.Stat(filepath.Dir(bPath)); st.Mode().Perm() != 0o700 {
		t.Errorf("replica folder mode %v, want 0700", st.Mode())
	}

	// Each lists the session with the cwd its own file holds.
	for s, want := range map[*station]string{a: "/Users/ann/proj", b: "/home/ann/proj"} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			cat, err := s.d.proj.Catalog(t.Context())
			if err != nil || len(cat) != 1 {
				return false, fmt.Sprintf("%s's catalog: %v %+v", s.name, err, cat)
			}
			return cat[0].Cwd == want, fmt.Sprintf("%s lists the session in %q, want %q", s.name, cat[0].Cwd, want)
		})
	}

	// B continues the session; A receives it.
	appendLine(t, bPath, msgLine("e3", "e2", "continued on B"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		b, _ := os.ReadFile(aPath)
		l := splitLines(string(b))
		return len(l) == 4 && l[3] == msgLine("e3", "e2", "continued on B"), fmt.Sprintf("A's file: %q", l)
	})

	// Settled: each station published only its own lines, once.
	waitUntil(t, 10*time.Second, func() (bool, string) {
		sa, sb := a.d.tailer.Stats(), b.d.tailer.Stats()
		return sa.LinesPublished == 3 && sb.LinesPublished == 1, fmt.Sprintf("A published %d, B %d", sa.LinesPublished, sb.LinesPublished)
	})
	// Nothing else appears after a few rescans.
	r0 := a.d.tailer.Stats().Rescans
	waitUntil(t, 10*time.Second, func() (bool, string) { return a.d.tailer.Stats().Rescans >= r0+3, "rescans" })
	if sa, sb := a.d.tailer.Stats(), b.d.tailer.Stats(); sa.LinesPublished != 3 || sb.LinesPublished != 1 {
		t.Fatalf("republished: A %d, B %d", sa.LinesPublished, sb.LinesPublished)
	}
	fa, fb := a.sessionFiles(), b.sessionFiles()
	if len(fa) != 1 || len(fb) != 1 {
		t.Fatalf("files: A %v, B %v", fa, fb)
	}

	// /metrics reports what status reports.
	for _, s := range []*station{a, b} {
		st, err := s.status()
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]int64{
			"pisyncd_lines_published_total":       st.Tailer.LinesPublished,
			"pisyncd_replica_lines_written_total": st.Replicator.LinesWritten,
			"pisyncd_replica_files_created_total": st.Replicator.FilesCreated,
			"pisyncd_hub_lines_forwarded_total":   st.Forwarder.Forwarded,
			"pisyncd_hub_lines_downloaded_total":  st.Downloader.Copied,
			"pisyncd_hub_forwarder_connected":     1,
			"pisyncd_hub_downloader_connected":    1,
			"pisyncd_hub_link_up":                 1,
		} {
			if got := metricValue(t, s, name); got != float64(want) {
				t.Errorf("%s: %s = %v, status says %d", s.name, name, got, want)
			}
		}
	}
	if n := metricValue(t, b, "pisyncd_replica_lines_written_total"); n != 3 {
		t.Errorf("B wrote %v lines, want 3 (header and two entries)", n)
	}

	// A context query reads a station's own lines from its file and the
	// other's from the store: nothing records where the replicator wrote
	// them. Both answers are the same.
	var answers []string
	for _, c := range []struct {
		s           *station
		file, store int64
	}{{a, 2, 1}, {b, 1, 2}} {
		st0 := c.s.d.proj.Stats()
		var out strings.Builder
		if err := c.s.d.proj.WriteContext(t.Context(), &out, sid, "", c.s.d.proj.Rules()); err != nil {
			t.Fatalf("%s: context: %v", c.s.name, err)
		}
		st := c.s.d.proj.Stats()
		if file, store := st.BodiesFromFile-st0.BodiesFromFile, st.BodiesFromStore-st0.BodiesFromStore; file != c.file || store != c.store {
			t.Errorf("%s: %d bodies from its file, %d from the store; want %d and %d", c.s.name, file, store, c.file, c.store)
		}
		answers = append(answers, out.String())
	}
	if answers[0] != answers[1] || !strings.Contains(answers[0], "continued on B") {
		t.Errorf("contexts differ:\nA %s\nB %s", answers[0], answers[1])
	}
}

// metricValue reads one metric of a station's registry, as /metrics serves it.
func metricValue(t *testing.T, s *station, name string) float64 {
	t.Helper()
	families, err := s.d.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s: no metric %s", s.name, name)
	return 0
}

// TestConcurrentWritersAndHubOutage: A and B append to the same session at
// the same time, partly while the hub is down; after it returns both files
// hold every entry (as sibling branches), each exactly once.
func TestConcurrentWritersAndHubOutage(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	sid := "0199cccc-0000-7000-8000-000000000002"
	aPath := filepath.Join(a.cfg.SessionsDir, "--work--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	appendLine(t, aPath, hdrLine(sid, "/work"))
	appendLine(t, aPath, msgLine("root", "", "start"))
	bPath := filepath.Join(b.cfg.SessionsDir, "--work--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(bPath)
		return err == nil, "B's copy"
	})

	write := func(path, who string, from, to int) {
		for i := from; i < to; i++ {
			appendLine(t, path, msgLine(fmt.Sprintf("%s%03d", who, i), "root", fmt.Sprintf("%s says %d", who, i)))
		}
	}
	write(aPath, "a", 0, 20)
	write(bPath, "b", 0, 20)
	hub.stop()
	write(aPath, "a", 20, 40) // offline: local publishing goes on
	write(bPath, "b", 20, 40)
	hub.start()
	write(aPath, "a", 40, 50)
	write(bPath, "b", 40, 50)

	waitUntil(t, 60*time.Second, func() (bool, string) {
		la, lb := lineSet(a.sessionFiles()["--work--/2026-11-30T00-00-00-000Z_"+sid+".jsonl"]), lineSet(b.sessionFiles()["--work--/2026-11-30T00-00-00-000Z_"+sid+".jsonl"])
		return len(la) == 101 && reflect.DeepEqual(la, lb), fmt.Sprintf("A has %d entries, B %d", len(la), len(lb))
	})
	for _, s := range []*station{a, b} {
		lines := s.sessionFiles()["--work--/2026-11-30T00-00-00-000Z_"+sid+".jsonl"]
		seen := map[string]bool{}
		for _, l := range lines {
			if seen[l] {
				t.Fatalf("%s: duplicate line %s", s.name, l)
			}
			seen[l] = true
		}
	}
	waitUntil(t, 10*time.Second, func() (bool, string) {
		st, _ := a.d.status(t.Context())
		return st.Replicator != nil && st.Replicator.ForkedSessions == 1, fmt.Sprintf("forks %+v", st.Replicator)
	})
}

// TestHostileRemoteHeader: a remote session whose header and id try to
// escape the sessions dir is contained or rejected, never written outside.
func TestHostileRemoteHeader(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	// A's own files may be named anything; the id is what pi reads.
	for i, c := range []struct{ sid, cwd string }{
		{"../../../../tmp/evil", "/../../../etc"},
		{"good-id", "/../../etc/cron.d"},
	} {
		p := filepath.Join(a.cfg.SessionsDir, "--x--", fmt.Sprintf("h%d.jsonl", i))
		os.MkdirAll(filepath.Dir(p), 0o700)
		appendLine(t, p, hdrLine(c.sid, c.cwd))
		appendLine(t, p, msgLine("e1", "", "x"))
	}
	// The id pi would not take as a session's (spec §1) in a file named
	// without it makes no file name: refused. The other lands under its
	// id, in its folder, not under A's file name.
	// (Quarantined: the session's lines are counted and passed over.)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		files := b.sessionFiles()
		st := b.d.repl.Stats()
		// In the folder pi names for the cwd resolved, /etc/cron.d's:
		// a name under the sessions root like any other.
		_, good := files["--etc-cron.d--/2026-11-30T00-00-00-000Z_good-id.jsonl"]
		_, refused := st.Quarantined["../../../../tmp/evil"]
		return len(files) == 1 && good && refused, fmt.Sprintf("B files %v, quarantined %v", files, st.Quarantined)
	})
	for rel := range b.sessionFiles() {
		if strings.HasPrefix(rel, "..") || !strings.HasPrefix(rel, "--") {
			t.Errorf("replica outside a project folder: %s", rel)
		}
	}
	if _, err := os.Stat("/tmp/evil"); err == nil {
		t.Fatal("wrote outside the root")
	}
}

// TestLinkedProjectFolder: on B the project folder is a link to another
// disk, as pi allows (spec §1). A's session lands behind the link, B's
// continuation written there reaches A, and when A deletes the session B's
// copy goes to a trash folder, even from another file system (tmpfs, where
// /dev/shm is one).
func TestLinkedProjectFolder(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b := newStation(t, "ws-b", hub.url(), "")
	elsewhere, err := os.MkdirTemp("/dev/shm", "pisyncd-linked-")
	if err != nil {
		elsewhere = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(elsewhere) })
	}
	if err := os.MkdirAll(b.cfg.SessionsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(b.cfg.SessionsDir, "--work-linked--")); err != nil {
		t.Fatal(err)
	}

	sid := "0199dddd-0000-7000-8000-000000000001"
	name := "2026-11-30T00-00-00-000Z_" + sid + ".jsonl"
	aPath := filepath.Join(a.cfg.SessionsDir, "--work-linked--", name)
	os.MkdirAll(filepath.Dir(aPath), 0o700)
	appendLine(t, aPath, hdrLine(sid, "/work/linked"))
	appendLine(t, aPath, msgLine("e1", "", "from A"))

	bPath := filepath.Join(elsewhere, name)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		raw, err := os.ReadFile(bPath)
		return err == nil && len(splitLines(string(raw))) == 2, fmt.Sprintf("B's file behind the link: %v %q", err, raw)
	})
	appendLine(t, bPath, msgLine("e2", "e1", "continued on B, behind the link"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		raw, _ := os.ReadFile(aPath)
		l := splitLines(string(raw))
		return len(l) == 3 && l[2] == msgLine("e2", "e1", "continued on B, behind the link"), fmt.Sprintf("A's file: %q", l)
	})
	if st := b.d.tailer.Stats(); st.LinesPublished != 1 {
		t.Errorf("B published %d lines, want 1 (its own)", st.LinesPublished)
	}

	// Deleted on A: B's copy is moved, never unlinked, and stays private.
	want, _ := os.ReadFile(bPath)
	if err := os.Remove(aPath); err != nil {
		t.Fatal(err)
	}
	var trashed []string
	waitUntil(t, 30*time.Second, func() (bool, string) {
		trashed = nil
		for _, dir := range []string{filepath.Join(b.cfg.SessionsDir, ".pisyncd-trash"), filepath.Join(elsewhere, ".pisyncd-trash")} {
			m, _ := filepath.Glob(filepath.Join(dir, "*"+sid+"*"))
			trashed = append(trashed, m...)
		}
		_, err := os.Stat(bPath)
		return os.IsNotExist(err) && len(trashed) == 1, fmt.Sprintf("B's file: %v; in the trash: %q", err, trashed)
	})
	if got, _ := os.ReadFile(trashed[0]); string(got) != string(want) {
		t.Fatalf("trashed copy differs:\n got %q\nwant %q", got, want)
	}
	t.Logf("moved to %s", trashed[0])
}
