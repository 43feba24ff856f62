package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestHostilePreclaimedMessageIDs replays an attack a probe found (a
// teammate's node against an encrypted team). The hub drops a message
// whose Nats-Msg-Id it saw within two minutes anywhere in PI_HUB, and
// answers "duplicate" as if it had stored it. A sealed line's id was its
// hub subject and PI_LOCAL position, both of which any node of the team
// reads on the hub; eve published junk on her own subject carrying the
// ids of ann's next lines. The hub then dropped ann's line, ann counted it
// as on the hub, bob's copy of the session lost it for good (the next
// line's parent missing), and an erase was dropped the same way while
// ann's user was told it went out. Proves that each of ann's lines after
// eve's claims reaches bob, and then that ann's erase reaches him too.
func TestHostilePreclaimedMessageIDs(t *testing.T) {
	ringFile := filepath.Join(t.TempDir(), "team.key")
	ring := keyring.New(time.Now())
	if err := keyring.Save(ringFile, ring); err != nil {
		t.Fatal(err)
	}
	e := startHostile(t, func(c *config.Config) { c.Encrypt, c.KeyFile = "on", ringFile })
	ann, bob := e.ann, e.bob
	sid := "0199d100-0000-7000-8000-000000000001"
	writeSession(t, ann, sid, 2) // entries 0199-0, 0199-1
	waitSecFile(t, bob, sid, 3, 30*time.Second)

	up := eventlog.UpPrefix + ".ann." + seal.Token(ring, sid)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	info, err := ann.d.log.Stream().Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every id ann's next lines (and chunks, and an erase) could take.
	claim := func(from uint64) {
		t.Helper()
		for pos := from; pos < from+8; pos++ {
			for _, id := range []string{up + ":" + strconv.FormatUint(pos, 10), up + ":" + strconv.FormatUint(pos, 10) + "/1"} {
				h := nats.Header{}
				h.Set(nats.MsgIdHdr, id)
				e.eve.Raw(t, "junk", h, []byte("junk"))
			}
		}
	}
	claim(info.State.LastSeq + 1)

	parent := "0199-1"
	var lines []string
	for i := range 3 {
		id := fmt.Sprintf("ann-%d", i)
		l := msgLine(id, parent, "after eve's claims "+id)
		appendLine(t, secPath(ann, sid), l)
		lines, parent = append(lines, l), id
	}
	waitLine(t, bob, sid, lines[len(lines)-1])
	if a, b := readLines(secPath(ann, sid)), readLines(secPath(bob, sid)); !slices.Equal(a, b) {
		t.Fatalf("bob's file is not ann's:\nann %q\nbob %q", a, b)
	}

	if info, err = ann.d.log.Stream().Info(ctx); err != nil {
		t.Fatal(err)
	}
	claim(info.State.LastSeq + 1)
	if _, err := eraseViaDaemon(ctx, ann.cfg, sid); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(secPath(bob, sid))
		return os.IsNotExist(err), fmt.Sprintf("bob's copy of the erased session: %v", err)
	})
}
