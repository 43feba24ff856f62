package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/replicate"
)

// legacyCwd is the cwd of the corpus's version 1 session.
const legacyCwd = "/home/alice/legacy"

// oldSessionOnTwo starts a hub and stations A and B, and puts the corpus's
// version 1 session on A; it returns once B holds the same bytes.
func oldSessionOnTwo(t *testing.T) (hub *testHub, a, b *station, v1 []byte, aFile, bFile string) {
	return oldFileOnTwo(t, "v1-linear.jsonl", "v1-sess-0001", legacyCwd)
}

// oldFileOnTwo is oldSessionOnTwo for the corpus's file name, whose
// session is sid and cwd cwd.
func oldFileOnTwo(t *testing.T, name, sid, cwd string) (hub *testHub, a, b *station, v1 []byte, aFile, bFile string) {
	t.Helper()
	testenv.Oracle(t) // skips without node
	hub = startTestHub(t)
	a = newStation(t, "ws-a", hub.url(), "")
	b = newStation(t, "ws-b", hub.url(), "")
	v1, err := os.ReadFile(filepath.Join(testenv.ConformanceDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join(replicate.CwdFolder(cwd), "2025-03-01T10-00-00-000Z_"+sid+".jsonl")
	aFile, bFile = filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
	os.MkdirAll(filepath.Dir(aFile), 0o700)
	testenv.WriteFile(t, aFile, v1)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got, _ := os.ReadFile(bFile)
		return string(got) == string(v1), fmt.Sprintf("B's copy: %d bytes of %d", len(got), len(v1))
	})
	return hub, a, b, v1, aFile, bFile
}

// TestOldSessionMigrationConverges: a version 1 session (from the
// conformance corpus) is on A and B; real pi opens it on A, which rewrites
// the file in place with random new ids and appends. B's copy must become
// A's migrated file, byte for byte, not the old lines plus the renumbered
// ones; then pi continues it on B (no second migration there), and both
// files end equal, each line once, with the same context in real pi.
func TestOldSessionMigrationConverges(t *testing.T) {
	_, a, b, v1, aFile, bFile := oldSessionOnTwo(t)

	// pi opens it on A: migration in place, then two more entries.
	piWrite(t, `[{"op":"user","text":"back to the old session"},{"op":"assistant","text":"migrated and continued"}]`,
		filepath.Dir(aFile), "--cwd", legacyCwd, "--open", aFile)
	aLines := readLines(aFile)
	if len(aLines) < 4 || !strings.Contains(aLines[0], `"version":3`) || strings.Contains(string(v1), aLines[1]) {
		t.Fatalf("pi did not migrate A's file: %q", aLines)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return reflect.DeepEqual(readLines(bFile), aLines), fmt.Sprintf("B's copy %q\nA's file %q", readLines(bFile), aLines)
	})
	samePi(t, "context", aFile, bFile)

	// pi continues it on B: the file is version 3 now, nothing is
	// migrated again, and A gets the new entries.
	s2 := piWrite(t, `[{"op":"user","text":"and on B"},{"op":"assistant","text":"still one conversation"}]`,
		filepath.Dir(bFile), "--cwd", legacyCwd, "--open", bFile)
	bLines := readLines(bFile)
	if len(bLines) != len(aLines)+2 {
		t.Fatalf("B's file has %d lines after pi, want %d: %q", len(bLines), len(aLines)+2, bLines)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return reflect.DeepEqual(readLines(aFile), bLines), fmt.Sprintf("A's file %q\nB's file %q", readLines(aFile), bLines)
	})
	ctx := samePi(t, "context", aFile, bFile)
	if ctx["leafId"] != s2.LeafID {
		t.Errorf("leaf %v, pi's writer ended on %s", ctx["leafId"], s2.LeafID)
	}
	// The projections follow the migration too: the context they serve
	// is pi's, not the old lines and the renumbered ones together.
	waitProjectedContext(t, ctx, "v1-sess-0001", a, b)
	// B's old copy went to the trash, not away.
	trash, _ := filepath.Glob(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "*"))
	if len(trash) != 1 {
		t.Errorf("B's trash: %v, want the old copy", trash)
	} else if old, _ := os.ReadFile(trash[0]); string(old) != string(v1) {
		t.Errorf("B's trashed copy is not the old file")
	}
	st, err := b.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Replicator.Migrated != 1 {
		t.Errorf("B decided %d migrations, want 1", st.Replicator.Migrated)
	}
}

// TestVersion2SessionMigration: real pi opens a version 2 session (the
// corpus's, with a hookMessage) on A. pi rewrites it as version 3 in
// place, which changes only the header and the hookMessage line (now
// custom): the tailer publishes those, and not the lines it holds already.
// B's copy becomes A's file, and both machines' projections serve pi's
// context. (Found by a probe on 2026-12-06: the projection took the new
// header for a migration that publishes every line again, as pi's
// version 1 migration does, started the tree again from it, and served a
// context of the new lines alone, the old ones lost.)
func TestVersion2SessionMigration(t *testing.T) {
	const sid, cwd = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "/home/alice/proj"
	hub, a, b, _, aFile, bFile := oldFileOnTwo(t, "v2-hookmessage.jsonl", sid, cwd)
	piWrite(t, `[{"op":"user","text":"back to the version 2 session"},{"op":"assistant","text":"migrated and continued"}]`,
		filepath.Dir(aFile), "--cwd", cwd, "--open", aFile)
	aLines := readLines(aFile)
	if len(aLines) < 7 || !strings.Contains(aLines[0], `"version":3`) {
		t.Fatalf("pi did not migrate A's file: %q", aLines)
	}
	// B's copy stays in version 2 (pi reads it as the same session) and
	// takes A's new lines: as many lines as A's file. So does the copy of
	// C, a machine that joins after the migration and reads it all from
	// the hub.
	c := newStation(t, "ws-c", hub.url(), "")
	cFile := filepath.Join(c.cfg.SessionsDir, strings.TrimPrefix(bFile, b.cfg.SessionsDir))
	for _, f := range []string{bFile, cFile} {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			return len(readLines(f)) == len(aLines), fmt.Sprintf("copy %s: %q\nA's file %q", f, readLines(f), aLines)
		})
	}
	if !reflect.DeepEqual(readLines(cFile), readLines(bFile)) {
		t.Errorf("C's copy %q\nB's copy %q", readLines(cFile), readLines(bFile))
	}
	// pi opens it on B: its migration gives A's bytes, and the turn on B
	// reaches A.
	piWrite(t, `[{"op":"user","text":"and on B"},{"op":"assistant","text":"one conversation"}]`,
		filepath.Dir(bFile), "--cwd", cwd, "--open", bFile)
	bLines := readLines(bFile)
	if len(bLines) != len(aLines)+2 || !reflect.DeepEqual(bLines[:len(aLines)], aLines) {
		t.Fatalf("B's file after pi opened it:\n%q\nA's before:\n%q", bLines, aLines)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return reflect.DeepEqual(readLines(aFile), bLines), fmt.Sprintf("A's file %q\nB's file %q", readLines(aFile), bLines)
	})
	ctx := samePi(t, "context", aFile, bFile)
	waitProjectedContext(t, ctx, sid, a, b, c)
}

// waitProjectedContext waits until each station's projection serves the
// context real pi computed (piCtx, samePi's answer) for session sid.
func waitProjectedContext(t *testing.T, piCtx map[string]any, sid string, stations ...*station) {
	t.Helper()
	var want []string
	for _, id := range piCtx["contextEntryIds"].([]any) {
		want = append(want, fmt.Sprint(id))
	}
	for _, s := range stations {
		waitUntil(t, 30*time.Second, func() (bool, string) {
			c, err := s.d.proj.Context(t.Context(), sid)
			if err != nil {
				return false, err.Error()
			}
			var got []string
			for _, id := range c.EntryIDs {
				str, _ := id.String()
				got = append(got, str)
			}
			return reflect.DeepEqual(got, want), fmt.Sprintf("%s's projection: %v, pi: %v", s.name, got, want)
		})
	}
}

// TestOldSessionMigratedTwice: pi opens the old session on A and on B
// while the hub is down, so both migrate their copy, each with its own
// random ids, and continue it. Once the hub is back, the first migration
// in hub order wins on both machines: the files end equal, each line once,
// and real pi reads them alike. (The losing machine's own turn stays in its
// trash copy and in the event log; docs/REPLICATION.md.)
func TestOldSessionMigratedTwice(t *testing.T) {
	hub, _, _, v1, aFile, bFile := oldSessionOnTwo(t)
	hub.stop()
	piWrite(t, `[{"op":"user","text":"on A, offline"},{"op":"assistant","text":"A's answer"}]`, filepath.Dir(aFile), "--cwd", legacyCwd, "--open", aFile)
	piWrite(t, `[{"op":"user","text":"on B, offline"},{"op":"assistant","text":"B's answer"}]`, filepath.Dir(bFile), "--cwd", legacyCwd, "--open", bFile)
	hub.start()
	waitUntil(t, 60*time.Second, func() (bool, string) {
		la, lb := readLines(aFile), readLines(bFile)
		return len(la) > 0 && reflect.DeepEqual(la, lb), fmt.Sprintf("A %d lines, B %d lines", len(la), len(lb))
	})
	lines := readLines(aFile)
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("a line twice: %s", l)
		}
		seen[l] = true
	}
	// The header, the old entries renumbered, and the winner's turn.
	if want := len(splitLines(string(v1))) + 2; len(lines) != want {
		t.Errorf("the converged file has %d lines, want %d: %q", len(lines), want, lines)
	}
	samePi(t, "context", aFile, bFile)
}

// TestMigratedReplicaCutIsFilledInItsForm: B's copy of a session pi
// migrated (on A) is cut short; A's next turn fills it again with the
// migrated lines only. The store holds the session in both forms, and
// the old form's lines, which the file lacks too, would make it two
// sessions in one file that pi cannot read as either.
func TestMigratedReplicaCutIsFilledInItsForm(t *testing.T) {
	_, _, b, v1, aFile, bFile := oldSessionOnTwo(t)
	piWrite(t, `[{"op":"user","text":"back to the old session"},{"op":"assistant","text":"migrated and continued"}]`,
		filepath.Dir(aFile), "--cwd", legacyCwd, "--open", aFile)
	aLines := readLines(aFile)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return reflect.DeepEqual(readLines(bFile), aLines), fmt.Sprintf("B's copy %q\nA's file %q", readLines(bFile), aLines)
	})

	// B's copy cut after its second line, then a turn on A.
	data, _ := os.ReadFile(bFile)
	keep := len(aLines[0]) + 1 + len(aLines[1]) + 1
	if err := os.WriteFile(bFile, data[:keep], 0o600); err != nil {
		t.Fatal(err)
	}
	piWrite(t, `[{"op":"user","text":"after B lost lines"},{"op":"assistant","text":"they come back"}]`,
		filepath.Dir(aFile), "--cwd", legacyCwd, "--open", aFile)
	aLines = readLines(aFile)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		got := readLines(bFile)
		return reflect.DeepEqual(got, aLines), fmt.Sprintf("B's copy %q\nA's file %q", got, aLines)
	})
	for _, l := range readLines(bFile) {
		if strings.Contains(string(v1), l) {
			t.Fatalf("B's migrated copy got a line of the old form back: %s", l)
		}
	}
	samePi(t, "context", aFile, bFile)
	if st, err := b.status(); err != nil || st.Replicator.Waiting != 0 {
		t.Errorf("B's status: %v, %+v", err, st.Replicator)
	}
}
