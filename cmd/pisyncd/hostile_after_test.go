package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHostileHonestPathAfterAttacks replays several attacks on one set-up
// (bad headers of both kinds, split lines that never end, a line with a
// raw newline and a line closing a cycle through ann's entries on an old
// session of hers, a deletion of another of her sessions), then measures
// the honest path. Proves that afterwards ann's new session and her
// append to the old one both reach bob within the bound, and that real pi
// opens every session file on ann and bob without error.
func TestHostileHonestPathAfterAttacks(t *testing.T) {
	e := startHostile(t, nil)
	oldSID, otherSID := "0199a100-0000-7000-8000-000000000001", "0199a100-0000-7000-8000-000000000002"
	writeSession(t, e.ann, oldSID, 3) // 0199-0 … 0199-2
	writeSession(t, e.ann, otherSID, 1)
	waitSecFile(t, e.bob, oldSID, 4, 30*time.Second)
	waitSecFile(t, e.bob, otherSID, 2, 30*time.Second)
	e.idle(t, oldSID)

	// Attack 1: bad headers of both kinds.
	badHeaders(t, e, 50, func(i int) string { return []string{"object", "long"}[i%2] })
	// Attack 2: split lines whose end never comes, on two sessions.
	payload := make([]byte, eventlog.MaxChunk)
	for s := 0; s < 2; s++ {
		sid := fmt.Sprintf("0199e5e3-0000-7000-8000-%012d", s)
		sum := sha256.Sum256([]byte(sid))
		for i := 1; i <= 4; i++ {
			e.eve.MustPublish(t, sid, testenv.Forged{ID: "eve-long", Type: "message", File: secRel(sid),
				Sha: hex.EncodeToString(sum[:]), Chunk: fmt.Sprintf("%d/1000000", i), Payload: payload})
		}
	}
	// Attack 3: two objects in one line, on ann's old session.
	e.eve.Line(t, oldSID, "eve-r1", "0199-2", "message",
		[]byte(msgLine("eve-r1", "0199-2", "EVE one")+"\n"+msgLine("eve-r2", "eve-r1", "EVE two")))
	// Attack 4c: ann's second entry again, its parent her leaf.
	e.eve.Line(t, oldSID, "0199-1", "0199-2", "message", []byte(msgLine("0199-1", "0199-2", "EVE loop")))
	// Attack 5a: a deletion of ann's other session.
	eveControl(t, e, otherSID, "delete", "tombstone", secRel(otherSID))

	// The honest path: a new session, and an append to the old one.
	newSID := "0199a100-0000-7000-8000-000000000003"
	appended := msgLine("ann-after", "0199-2", "ann goes on after the attacks")
	start := time.Now()
	writeSession(t, e.ann, newSID, 2)
	appendLine(t, secPath(e.ann, oldSID), appended)
	arrived := map[string]time.Duration{}
	waitUntil(t, stallBound, func() (bool, string) {
		if _, ok := arrived["new"]; !ok && len(readLines(secPath(e.bob, newSID))) == 3 {
			arrived["new"] = time.Since(start)
		}
		if _, ok := arrived["append"]; !ok && slices.Contains(readLines(secPath(e.bob, oldSID)), appended) {
			arrived["append"] = time.Since(start)
		}
		return len(arrived) == 2, fmt.Sprintf("arrived on bob: %v", arrived)
	})
	t.Logf("honest path after the attacks: ann's new session reached bob in %v, her append to the old one in %v",
		arrived["new"].Round(time.Millisecond), arrived["append"].Round(time.Millisecond))

	// Real pi opens every session file on both machines.
	for _, s := range []*station{e.ann, e.bob} {
		var rels []string
		for rel := range s.sessionFiles() {
			rels = append(rels, rel)
		}
		sort.Strings(rels)
		for _, rel := range rels {
			if _, _, err := piContext(t, filepath.Join(s.cfg.SessionsDir, rel)); err != nil {
				t.Errorf("%s: pi cannot open %s: %v", s.name, rel, err)
			}
		}
		t.Logf("%s: pi opened %d session files", s.name, len(rels))
	}
}
