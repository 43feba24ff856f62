package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// TestHostileForgedHubPosition replays a hub operator's attack a probe
// found. The Pi-Src-Seq of the last message on a session's hub subject
// tells ann's forwarder how far she forwarded it, and that header is
// outside the seal. The operator puts on ann's subject a copy of her own
// last envelope claiming the PI_LOCAL position her next line will take (one
// past her last: easy to guess), then garbage claiming a position she never
// reached. Before, ann passed over every line up to the claim as on the
// hub, her status saying everything was there, and bob never had them.
// Proves that each of ann's next lines reaches bob, that his file ends as
// hers, and that her status counts the two lines she did not write.
func TestHostileForgedHubPosition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ringFile := filepath.Join(t.TempDir(), "team.key")
	ring := keyring.New(time.Now())
	if err := keyring.Save(ringFile, ring); err != nil {
		t.Fatal(err)
	}
	h, run := keyedHub(t)
	ann, bob := run("ann", "on", ringFile), run("bob", "on", ringFile)
	sid := "0199d000-0000-7000-8000-000000000001"
	writeSession(t, ann, sid, 3) // entries 0199-0 … 0199-2
	waitSecFile(t, bob, sid, 4, 30*time.Second)
	// Restarted: ann starts with none of her data keys in memory; the
	// envelope is checked with the key message read from the hub (by her
	// forwarder, or by her downloader, which meets the forged line too).
	ann.stop()
	ann.start()

	// The hub's operator: an admin of the team's account.
	js := h.operator(t, "t1")
	hub, err := js.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	up := eventlog.UpPrefix + ".ann." + seal.Token(ring, sid)
	last, err := hub.GetLastMsgForSubject(ctx, up)
	if err != nil {
		t.Fatalf("ann's last line on the hub: %v", err)
	}
	forge := func(data []byte, src uint64) {
		t.Helper()
		m := nats.NewMsg(up)
		m.Data = data
		m.Header.Set(eventlog.HdrSeal, last.Header.Get(eventlog.HdrSeal))
		m.Header.Set(eventlog.HdrSrcSeq, strconv.FormatUint(src, 10))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("forge: %v", err)
		}
	}
	localLast := func() uint64 {
		t.Helper()
		info, err := ann.d.log.Stream().Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}

	forge(last.Data, localLast()+1)
	line1 := msgLine("ann-3", "0199-2", "after a copy of her own envelope")
	appendLine(t, secPath(ann, sid), line1)
	waitLine(t, bob, sid, line1)

	forge([]byte("not an envelope"), 1<<40)
	line2 := msgLine("ann-4", "ann-3", "after garbage far ahead")
	appendLine(t, secPath(ann, sid), line2)
	waitLine(t, bob, sid, line2)

	if a, b := readLines(secPath(ann, sid)), readLines(secPath(bob, sid)); !slices.Equal(a, b) {
		t.Errorf("bob's file is not ann's:\nann %q\nbob %q", a, b)
	}
	if n := ann.d.fwd.Stats().NotOwn; n != 2 {
		t.Errorf("ann's status counts %d lines on her subjects she did not write, want 2", n)
	}
}
