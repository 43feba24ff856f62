package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/replicate"
)

// eveControl publishes a control event (op "delete" or "restore") for the
// file rel of session sid, built as the tailer builds its own.
func eveControl(t *testing.T, e *hostileEnv, sid, op, typ, rel string) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"op": op, "file": rel, "time": time.Now().UTC().Format(time.RFC3339Nano)})
	e.eve.MustPublish(t, sid, testenv.Forged{Type: typ, File: rel, Op: op, Payload: raw})
}

// copiesOf lists every file of session sid on s: in its sessions dir and in
// its trash.
func copiesOf(s *station, sid string) (live, trashed []string) {
	for rel := range s.sessionFiles() {
		if strings.Contains(rel, sid) {
			live = append(live, rel)
		}
	}
	trashed, _ = filepath.Glob(filepath.Join(s.cfg.SessionsDir, replicate.TrashDir, "*"+sid+"*"))
	return live, trashed
}

// TestHostileForeignDelete replays attack 5a: eve, who never published a
// line of ann's session, publishes a deletion of it. Proves that a node
// cannot erase what is not its own: bob's copy stays in place, byte for
// byte, nothing of it goes to his trash, and ann's own file is untouched.
func TestHostileForeignDelete(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-000000000001"
	writeSession(t, e.ann, sid, 3)
	waitSecFile(t, e.bob, sid, 4, 30*time.Second)
	e.idle(t, sid)
	before := map[*station][]byte{}
	for _, s := range []*station{e.ann, e.bob} {
		before[s], _ = os.ReadFile(secPath(s, sid))
	}

	eveControl(t, e, sid, "delete", "tombstone", secRel(sid))
	e.settle(t, "del")

	for _, s := range []*station{e.ann, e.bob} {
		got, err := os.ReadFile(secPath(s, sid))
		if err != nil || string(got) != string(before[s]) {
			live, trashed := copiesOf(s, sid)
			t.Errorf("%s's file of ann's session after eve's deletion: %v (same bytes: %v); files %q, in the trash %q", s.name, err, string(got) == string(before[s]), live, trashed)
		}
		if _, trashed := copiesOf(s, sid); len(trashed) > 0 {
			t.Errorf("%s's trash holds ann's session after eve's deletion: %q", s.name, trashed)
		}
	}
}

// TestHostileForeignRestore replays attack 5b: ann deletes a session of
// hers, bob's copy goes to his trash (as it should), then eve, who never
// published a line of it, publishes a restore. Proves that a node cannot
// bring back what another deleted: neither bob nor ann gets the session
// back.
func TestHostileForeignRestore(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-000000000002"
	writeSession(t, e.ann, sid, 3)
	waitSecFile(t, e.bob, sid, 4, 30*time.Second)
	if err := os.Remove(secPath(e.ann, sid)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		live, trashed := copiesOf(e.bob, sid)
		return len(live) == 0 && len(trashed) == 1, "bob: files " + strings.Join(live, ",") + ", in the trash " + strings.Join(trashed, ",")
	})

	eveControl(t, e, sid, "restore", "restore", secRel(sid))
	e.settle(t, "rst")

	for _, s := range []*station{e.ann, e.bob} {
		if live, _ := copiesOf(s, sid); len(live) > 0 {
			t.Errorf("%s has ann's deleted session back after eve's restore: %q", s.name, live)
		}
	}
}
