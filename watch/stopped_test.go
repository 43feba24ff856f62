package watch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// opsOf lists the session's events by their operation ("" for a line).
func opsOf(n *node, sid string) string {
	var ops []string
	for _, ev := range n.events(sid) {
		ops = append(ops, ev.Op)
	}
	return strings.Join(ops, ",")
}

// TestDeletedWhileStopped: a session whose file was removed while no
// tailer ran is published deleted at the next start, before Ready, once;
// a session deleted before, one still on disk and one another machine
// deleted get nothing. (Before, such a session stayed live here and on
// every machine for good.)
func TestDeletedWhileStopped(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	path := func(sid string) string { return filepath.Join(root, "--p--", sid+".jsonl") }
	for _, sid := range []string{"kept", "gone", "before", "elsewhere"} {
		writeFile(t, path(sid), header(sid)+"\n"+entry("a1", "", sid)+"\n")
	}
	n := startNode(t, root, state)
	for _, sid := range []string{"kept", "gone", "before", "elsewhere"} {
		n.waitLines(sid, []string{header(sid), entry("a1", "", sid)})
	}
	os.Remove(path("before"))
	waitFor(t, 10*time.Second, func() (bool, string) {
		ops := opsOf(n, "before")
		return ops == ",,delete", "before: " + ops
	})
	n.stop()

	os.Remove(path("gone"))
	os.Remove(path("elsewhere")) // as the replicator moves a session another machine deleted
	var mu sync.Mutex
	var asked []string
	n = startNodeWith(t, root, state, Options{RescanInterval: time.Hour}, func(tl *Tailer) {
		tl.deletedElsewhere = func(_ context.Context, sid string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, sid)
			return sid == "elsewhere", nil
		}
	})
	<-n.tailer.Ready()
	want := map[string]string{"kept": ",", "gone": ",,delete", "before": ",,delete", "elsewhere": ","}
	for sid, w := range want {
		if got := opsOf(n, sid); got != w {
			t.Errorf("%s at Ready: events %q, want %q", sid, got, w)
		}
	}
	if ev := n.events("gone"); ev[len(ev)-1].File != "--p--/gone.jsonl" {
		t.Errorf("the tombstone names %q", ev[len(ev)-1].File)
	}
	if st := n.tailer.Stats(); st.FilesDeleted != 1 {
		t.Errorf("filesDeleted %d, want 1", st.FilesDeleted)
	}
	mu.Lock()
	if slices.Contains(asked, "before") {
		t.Errorf("asked the replicator about %v: a session deleted here already needs no word", asked)
	}
	mu.Unlock()
	n.stop()

	n = startNode(t, root, state)
	<-n.tailer.Ready()
	for sid, w := range want {
		if sid == "elsewhere" {
			w = ",,delete" // without the replicator's word, its removal is a deletion
		}
		if got := opsOf(n, sid); got != w {
			t.Errorf("%s after a second restart: events %q, want %q", sid, got, w)
		}
	}
}

// TestNoDeletionsFromAnEmptyStart: a start that finds no session file at
// all (a sessions dir not mounted yet) publishes no deletion, and says
// why; the sessions are there when their files come back.
func TestNoDeletionsFromAnEmptyStart(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	p := filepath.Join(root, "--p--", "s1.jsonl")
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n")
	n := startNode(t, root, state)
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	n.stop()
	if err := os.RemoveAll(filepath.Join(root, "--p--")); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	n = startNodeWith(t, root, state, Options{RescanInterval: time.Hour, Logger: logs.Logger()}, nil)
	<-n.tailer.Ready()
	if got := opsOf(n, "s1"); got != "," {
		t.Errorf("events %q, want the two lines alone", got)
	}
	if !strings.Contains(logs.String(), "no deletion is published for them: the sessions dir held no session file") {
		t.Errorf("no word of it in the log:\n%s", logs.String())
	}
}

// TestNoDeletionsWhileAFileFails: a file found at start that could not be
// read (it waits for another attempt) might be any held session's, so the
// sessions without a file are not published deleted then.
func TestNoDeletionsWhileAFileFails(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	p := filepath.Join(root, "--p--", "s1.jsonl")
	writeFile(t, p, header("s1")+"\n"+entry("a1", "", "one")+"\n")
	var logs testenv.LogBuffer
	n := startNodeWith(t, root, state, Options{RescanInterval: time.Hour, Logger: logs.Logger()}, nil)
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	<-n.tailer.Ready()
	// A session the store holds and no file does: its file is the one
	// that failed, for all the tailer can tell.
	if _, _, err := n.log.Publish(context.Background(), "s2", 0, []eventlog.Line{eventlog.NewLine([]byte(header("s2")), "", "", "session", "--p--/s2.jsonl", 0)}); err != nil {
		t.Fatal(err)
	}
	n.tailer.workers[0].rx.retrying.Add(1) // as a file whose read failed
	defer n.tailer.workers[0].rx.retrying.Add(-1)
	n.tailer.deletedWhileStopped(context.Background(), map[string]struct{}{"s1": {}, "s2": {}}, 2, "")
	if !strings.Contains(logs.String(), "a folder or file in it could not be read") {
		t.Errorf("no word of it in the log:\n%s", logs.String())
	}
	if ops := opsOf(n, "s2"); ops != "" {
		t.Errorf("s2's events %q, want its header alone", ops)
	}
}

// TestNoDeletionsFromALinkedFolderAway: the sessions of a linked project
// folder whose target is not there at start (a drive not mounted yet) are
// not published deleted; the link counts as a folder not readable, and the
// sessions are followed again once the target is back.
func TestNoDeletionsFromALinkedFolderAway(t *testing.T) {
	root, state, drive := t.TempDir(), t.TempDir(), t.TempDir()
	project := filepath.Join(drive, "project")
	writeFile(t, filepath.Join(project, "s1.jsonl"), header("s1")+"\n"+entry("a1", "", "one")+"\n")
	writeFile(t, filepath.Join(root, "--home--", "s2.jsonl"), header("s2")+"\n")
	if err := os.Symlink(project, filepath.Join(root, "--linked--")); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, root, state)
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one")})
	n.stop()
	if err := os.Rename(project, project+".away"); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	n = startNodeWith(t, root, state, Options{RescanInterval: 100 * time.Millisecond, Logger: logs.Logger()}, nil)
	<-n.tailer.Ready()
	if ops := opsOf(n, "s1"); ops != "," {
		t.Errorf("s1's events %q, want its two lines alone", ops)
	}
	if st := n.tailer.Stats(); st.UnreadableFolders != 1 || st.FilesDeleted != 0 {
		t.Errorf("unreadable folders %d, files deleted %d; want 1, 0", st.UnreadableFolders, st.FilesDeleted)
	}
	if err := os.Rename(project+".away", project); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(project, "s1.jsonl"), entry("a2", "a1", "two")+"\n")
	n.waitLines("s1", []string{header("s1"), entry("a1", "", "one"), entry("a2", "a1", "two")})
}

// TestNoDeletionsFromAnotherSessionsDir: a start on another sessions dir
// than the one the store's sessions were read from (PI_CODING_AGENT_DIR
// set for the shell and not the service) publishes no deletion for the
// sessions it does not find, and says why; back on the first dir, a file
// removed meanwhile is published deleted as before. (Before, every session
// was published deleted, and with a hub every machine moved its copies to
// the trash: a probe, 2026-12-07.)
func TestNoDeletionsFromAnotherSessionsDir(t *testing.T) {
	root, other, state := t.TempDir(), t.TempDir(), t.TempDir()
	rootFile := filepath.Join(state, "sessions-dir")
	for _, sid := range []string{"s1", "s2"} {
		writeFile(t, filepath.Join(root, "--p--", sid+".jsonl"), header(sid)+"\n")
	}
	writeFile(t, filepath.Join(other, "--q--", "s3.jsonl"), header("s3")+"\n")
	start := func(dir string) (*node, *testenv.LogBuffer) {
		var logs testenv.LogBuffer
		n := startNodeWith(t, dir, state, Options{RescanInterval: time.Hour, Logger: logs.Logger(), RootFile: rootFile}, nil)
		<-n.tailer.Ready()
		return n, &logs
	}
	n, _ := start(root)
	n.stop()
	n, logs := start(other)
	for _, sid := range []string{"s1", "s2"} {
		if ops := opsOf(n, sid); ops != "" {
			t.Errorf("%s's events on another sessions dir %q, want its header alone", sid, ops)
		}
	}
	if !strings.Contains(logs.String(), "the sessions dir is not the one they were read from") {
		t.Errorf("no word of it in the log:\n%s", logs.String())
	}
	n.stop()
	n, _ = start(root) // from other: s3 is not taken for deleted either
	if ops := opsOf(n, "s3"); ops != "" {
		t.Errorf("s3's events back on the first dir %q, want its header alone", ops)
	}
	n.stop()
	os.Remove(filepath.Join(root, "--p--", "s2.jsonl"))
	n, _ = start(root)
	if ops := opsOf(n, "s2"); ops != ",delete" {
		t.Errorf("s2 removed while stopped, on the dir it was read from: events %q, want it deleted", ops)
	}
	if ops := opsOf(n, "s1"); ops != "" {
		t.Errorf("s1's events %q, want its header alone", ops)
	}
}

// TestNoDeletionsBesideOtherUsersFiles: a file another user made in the
// sessions dir is never read, so it might be any held session's; the
// sessions without a file are not published deleted then. (Before, found
// counted it, and every session was published deleted.)
func TestNoDeletionsBesideOtherUsersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give a file to another user (chown)")
	}
	root, state := t.TempDir(), t.TempDir()
	p := filepath.Join(root, "--p--", "s1.jsonl")
	writeFile(t, p, header("s1")+"\n")
	n := startNode(t, root, state)
	n.waitLines("s1", []string{header("s1")})
	n.stop()
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	n = startNodeWith(t, root, state, Options{RescanInterval: time.Hour, Logger: logs.Logger()}, nil)
	<-n.tailer.Ready()
	if ops := opsOf(n, "s1"); ops != "" {
		t.Errorf("s1's events %q, want its header alone", ops)
	}
	if !strings.Contains(logs.String(), "other_users_files=1") {
		t.Errorf("no word of it in the log:\n%s", logs.String())
	}
}
