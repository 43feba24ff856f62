package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/replicate"
)

// TestDeletedWhileWrittenHere: a session deleted on A while a pi on B has
// it open. B's copy went to the trash at once, and pi's next line made a
// file without a header in its place, which pi cannot open and the tailer
// does not publish: the work after it was in no session anywhere. Now a
// copy a local pi wrote within crashAfter(PISYNC_IDLE_AFTER) waits: written
// again meanwhile, it stays, every line in it; left alone that long, it
// goes to the trash as before.
func TestDeletedWhileWrittenHere(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	b, blog := loggedStationAt(t, stationConfig(t, "ws-b", hub.url()), slog.LevelInfo)
	const pending = "written here within the last minute"

	write := func(sid, cwd string) (aPath, bPath string) {
		rel := sessionRel(cwd, sid)
		aPath, bPath = filepath.Join(a.cfg.SessionsDir, rel), filepath.Join(b.cfg.SessionsDir, rel)
		mustWriteLines(t, aPath, append([]string{hdrLine(sid, cwd)}, chain("a", "", 3, "from A")...))
		waitUntil(t, 30*time.Second, func() (bool, string) {
			n := len(b.sessionFiles()[rel])
			return n == 4, fmt.Sprintf("B has %d lines of %s", n, sid)
		})
		// B's pi continues the session; A deletes it a moment later.
		appendLine(t, bPath, msgLine("b1", "a00002", "B adds one"))
		if err := os.Remove(aPath); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 30*time.Second, func() (bool, string) {
			for _, l := range strings.Split(blog.String(), "\n") {
				if strings.Contains(l, pending) && strings.Contains(l, "session="+sid) {
					return true, ""
				}
			}
			return false, "B waiting to trash " + sid + ":\n" + blog.String()
		})
		return aPath, bPath
	}

	// 1. pi on B writes the session again: it stays, with every line.
	kept := "0199eeee-0000-7000-8000-0000000000c1"
	keptA, bPath := write(kept, "/work/kept")
	appendLine(t, bPath, msgLine("b2", "b1", "B goes on"))
	waitUntil(t, 60*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Replicator.KeptWritten == 1, fmt.Sprintf("B's status: %+v %v", st.Replicator, err)
	})
	// The text of status says so too (before: --json alone).
	if st, err := b.status(); err == nil {
		var text bytes.Buffer
		if err := printStatus(&text, &st); err != nil || !regexp.MustCompile(`deleted elsewhere, kept \(written here\)\s+1\n`).MatchString(text.String()) {
			t.Errorf("B's status text: %v\n%s", err, text.String())
		}
	}
	// On A, whose user deleted it, B's later lines are passed over: no
	// file comes back and nothing waits, across a restart too. Before,
	// they waited for good ("remote lines waiting" never 0).
	settledOnA := func(when string) {
		t.Helper()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			st, err := a.status()
			n := allCount(t, a, eventlog.AllSubject("ws-b", kept))
			return err == nil && n >= 2 && st.Replicator.Waiting == 0, fmt.Sprintf("%s: A holds %d of B's lines; its replicator %+v %v", when, n, st.Replicator, err)
		})
		if _, err := os.Stat(keptA); !os.IsNotExist(err) {
			t.Errorf("%s: A's copy of the session its user deleted is back: %v", when, err)
		}
	}
	settledOnA("B's lines on A")
	a.stop()
	a.start()
	settledOnA("after A's restart")
	got, err := os.ReadFile(bPath)
	if err != nil || !strings.Contains(string(got), `"id":"b2"`) || !strings.HasPrefix(string(got), `{"type":"session"`) {
		t.Fatalf("B's copy after it was written again: %v\n%s", err, got)
	}
	if trash, _ := filepath.Glob(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "*"+kept+"*")); len(trash) != 0 {
		t.Errorf("B trashed the session pi writes: %v", trash)
	}

	// 2. Left alone: the copy goes to the trash once the wait is over.
	gone := "0199eeee-0000-7000-8000-0000000000c2"
	_, bPath = write(gone, "/work/gone")
	before, _ := os.ReadFile(bPath)
	waitUntil(t, 60*time.Second, func() (bool, string) {
		trash, _ := filepath.Glob(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "*"+gone+"*"))
		_, err := os.Stat(bPath)
		return len(trash) == 1 && os.IsNotExist(err), fmt.Sprintf("B's trash %v, its copy %v", trash, err)
	})
	trash, _ := filepath.Glob(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "*"+gone+"*"))
	if after, err := os.ReadFile(trash[0]); err != nil || !reflect.DeepEqual(after, before) {
		t.Errorf("the trashed copy differs from B's file: %v", err)
	}

	// 3. pi on B, idle past the wait with the session open, writes its
	// next entry: pi appends by name, so the entry alone makes a new file
	// without a header. B puts the trashed copy back with it, and since B
	// wrote the session before, its restore brings the session back on A
	// with the new line.
	appendLine(t, bPath, msgLine("b3", "b1", "B is back from lunch"))
	waitUntil(t, 60*time.Second, func() (bool, string) {
		got, _ := os.ReadFile(bPath)
		st, err := b.status()
		if err != nil || st.Replicator == nil {
			return false, fmt.Sprint("B's status: ", err)
		}
		return string(got) == string(before)+msgLine("b3", "b1", "B is back from lunch")+"\n" && st.Replicator.Rejoined == 1,
			fmt.Sprintf("B's file:\n%s\nB's status: %+v", got, st.Replicator)
	})
	if trash, _ := filepath.Glob(filepath.Join(b.cfg.SessionsDir, replicate.TrashDir, "*"+gone+"*")); len(trash) != 0 {
		t.Errorf("the copy put back is still in the trash: %v", trash)
	}
	aPath := filepath.Join(a.cfg.SessionsDir, sessionRel("/work/gone", gone))
	waitUntil(t, 60*time.Second, func() (bool, string) {
		got, _ := os.ReadFile(aPath)
		return strings.Contains(string(got), `"id":"b3"`), fmt.Sprintf("A's copy:\n%s", got)
	})

	// 4. A's user restores the file A deleted (from a backup) while B
	// wrote on: A's file gets B's lines of meanwhile. They waited for
	// A's next restart, with "remote lines waiting 0".
	back := "0199eeee-0000-7000-8000-0000000000c4"
	backA, bPath := write(back, "/work/back")
	appendLine(t, bPath, msgLine("b2", "b1", "B goes on while A has it deleted"))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := a.status()
		n := allCount(t, a, eventlog.AllSubject("ws-b", back))
		return err == nil && n >= 2 && st.Replicator.Waiting == 0, fmt.Sprintf("A holds %d of B's lines; its replicator %+v %v", n, st.Replicator, err)
	})
	mustWriteLines(t, backA, append([]string{hdrLine(back, "/work/back")}, chain("a", "", 3, "from A")...))
	waitUntil(t, 60*time.Second, func() (bool, string) {
		got, _ := os.ReadFile(backA)
		return strings.Contains(string(got), `"id":"b1"`) && strings.Contains(string(got), `"id":"b2"`), fmt.Sprintf("A's restored copy:\n%s", got)
	})
}
