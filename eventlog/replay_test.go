package eventlog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
)

// sealedHub is a hub and a workstation's leaf, a team key in keyFile, and
// send, which seals a line of node's session sid at position pos and
// publishes it on the hub as node's forwarder does.
func sealedHub(t *testing.T) (hubJS jetstream.JetStream, ws *embedded.Server, all *eventlog.All, keyFile string, send func(node, sid string, l eventlog.Line, pos uint64)) {
	hubJS, ws, all = hubAndLeaf(t)
	ctx := context.Background()
	if _, err := eventlog.EnsureStream(ctx, hubJS, eventlog.KeysStreamConfig(1)); err != nil {
		t.Fatal(err)
	}
	keyFile = filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(keyFile, keyring.New(time.Now())); err != nil {
		t.Fatal(err)
	}
	senders := map[string]*eventlog.Crypt{}
	kh := eventlog.HubKeys(ctx, hubJS)
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	send = func(node, sid string, l eventlog.Line, pos uint64) {
		t.Helper()
		if senders[node] == nil {
			senders[node] = eventlog.NewCrypt(keyFile, node, true)
		}
		l.SrcSeq = pos
		subj, sealed, err := eventlog.SealLine(senders[node], sid, &l, kh)
		if err != nil {
			t.Fatal(err)
		}
		// The subject's last sequence, as the forwarder finds it again
		// after a refusal (a hub client may have published on it).
		var last uint64
		if m, err := hub.GetLastMsgForSubject(ctx, subj); err == nil {
			last = m.Sequence
		}
		if _, _, err := pub.Publish(ctx, subj, last, []eventlog.Line{sealed}); err != nil {
			t.Fatal(err)
		}
	}
	return hubJS, ws, all, keyFile, send
}

// copyFromHub runs w1's downloader, its encryption on (always) or auto,
// until the test ends, and returns its admission point.
func copyFromHub(t *testing.T, ws *embedded.Server, all *eventlog.All, keyFile string, always bool) *admit.Gate {
	return copyFromHubWith(t, ws, all, eventlog.NewCrypt(keyFile, "w1", always))
}

// copyFromHubWith is copyFromHub opening sealed lines with receiver.
func copyFromHubWith(t *testing.T, ws *embedded.Server, all *eventlog.All, receiver *eventlog.Crypt) *admit.Gate {
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	gate := admit.New("w1", admit.Limits{}, all, nil)
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: gate, MaxLine: 1 << 20, Crypt: receiver})
	if err != nil {
		t.Fatal(err)
	}
	stop := goRun(t, d)
	t.Cleanup(func() {
		stop()
		nc.Close()
	})
	return gate
}

// allLines lists PI_ALL's events as position:op-or-id.
func allLines(t *testing.T, all *eventlog.All) string {
	t.Helper()
	var got []string
	err := eventlog.ReadFiltered(context.Background(), all.JetStream(), eventlog.AllStream, eventlog.AllPrefix+".>", 0xffffffff, false, func(ev *eventlog.Event) error {
		got = append(got, fmt.Sprintf("%s/%d:%s%s", ev.Node, ev.SrcSeq, ev.Op, ev.ID))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

// TestDownloaderRefusesReplayedSealedLines: a hub client (the operator)
// copies sealed messages already on PI_HUB and publishes them again on
// their subject, with their headers and payload but without the
// Nats-Msg-Id, after later lines: a session's delete event again after
// its restore, a line again. Each still opens (its envelope binds its
// position, which is the same), so before the downloader admitted them,
// PI_ALL held the delete after the restore and the session was deleted
// again on every workstation. A sealed line at or before the last
// position admitted of its origin's session is now refused as replayed;
// the lines the origin sends after are copied.
func TestDownloaderRefusesReplayedSealedLines(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	ctx := context.Background()
	control := func(op string) eventlog.Line {
		raw := []byte(fmt.Sprintf(`{"op":%q,"file":"--p--/s1.jsonl"}`, op))
		return eventlog.Line{Raw: raw, Sha: sha256.Sum256(raw), Type: "tombstone", File: "--p--/s1.jsonl", Op: op}
	}
	lines := mkLines(3, 50, "e")
	send("n2", "s1", lines[0], 1)
	send("n2", "s1", control(eventlog.OpDelete), 2)
	send("n2", "s1", control(eventlog.OpRestore), 3)
	send("n2", "s1", lines[1], 4)

	// The operator, with a client of its own on the hub, publishes the
	// delete event and the first line again: same subject, headers and
	// envelope, no Nats-Msg-Id (nor the expected sequence), so the hub
	// stores them as new messages.
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	replay := func(seq uint64) { replayHub(t, hubJS, hub, seq) }
	replay(2) // the delete, after the restore
	// The first line, after the fourth, more times than the admission
	// point takes from an origin's session before it quarantines the
	// session: a replay is the hub's doing, not the origin's, and counts
	// for no quarantine (before, nine of them stopped the session's
	// copying from its origin on every workstation).
	for range 9 {
		replay(1)
	}
	send("n2", "s1", lines[2], 5)

	gate := copyFromHub(t, ws, all, keyFile, true)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		by := gate.Stats().ByOrigin["n2"].ByReason
		return by[admit.Reason(eventlog.RejectReplayed)] == 10, fmt.Sprintf("rejections %v", by)
	})
	waitCount(t, all, 5)
	if got, want := allLines(t, all), "n2/1:e0,n2/2:delete,n2/3:restore,n2/4:e1,n2/5:e2"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
}

// TestDownloaderRefusesUnsealedWhenOn: with PISYNC_ENCRYPT=on, a line in
// clear from the hub is refused as unsealed: any hub client (the
// operator, with its admin credentials or a node it added) could publish
// one on any node's subject, and a workstation admitted it as that
// node's, a session the team never wrote written into its sessions
// folder. The sealed lines around them are copied, those of the session
// whose subject they were published on too.
func TestDownloaderRefusesUnsealedWhenOn(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	lines := mkLines(2, 50, "e")
	send("n2", "s1", lines[0], 1)
	rawPublish(t, hubJS, eventlog.UpSubject("n2", "s7"), []byte(`{"type":"session","version":3,"id":"s7","timestamp":"2026-12-03T00:00:00.000Z","cwd":"/x"}`),
		map[string]string{eventlog.HdrType: "session", eventlog.HdrID: "s7", eventlog.HdrSrcSeq: "2"})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s8"), []byte(`{"type":"message","id":"f0"}`),
		map[string]string{eventlog.HdrType: "message", eventlog.HdrID: "f0"})
	// Lines in clear on the subject of n2's session s1 (its id known from
	// before encryption, say), more than the admission point takes before
	// it quarantines a session of an origin: they are not n2's doing and
	// count for no quarantine of n2's s1.
	for i := range 9 {
		raw := []byte(fmt.Sprintf(`{"type":"message","id":"g%d"}`, i))
		rawPublish(t, hubJS, eventlog.UpSubject("n2", "s1"), raw, map[string]string{eventlog.HdrType: "message", eventlog.HdrID: fmt.Sprint("g", i)})
	}
	send("n2", "s1", lines[1], 3)

	gate := copyFromHub(t, ws, all, keyFile, true)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		s := gate.Stats()
		return s.ByOrigin["n2"].ByReason[admit.Reason(eventlog.RejectUnsealed)] == 10 && s.ByOrigin["eve"].ByReason[admit.Reason(eventlog.RejectUnsealed)] == 1,
			fmt.Sprintf("rejections %+v", s.ByOrigin)
	})
	waitCount(t, all, 2)
	if got, want := allLines(t, all), "n2/1:e0,n2/3:e1"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
}

// replayHub publishes PI_HUB's message seq again, as a hub client can:
// same subject, Pi-* headers and payload, no Nats-Msg-Id.
func replayHub(t *testing.T, hubJS jetstream.JetStream, hub jetstream.Stream, seq uint64) {
	t.Helper()
	replayHubAs(t, hubJS, hub, seq, nil)
}

// replayHubAs is replayHub with the payload changed by change (nil: as
// stored), as a hub client tampering with a line can.
func replayHubAs(t *testing.T, hubJS jetstream.JetStream, hub jetstream.Stream, seq uint64, change func([]byte)) {
	t.Helper()
	ctx := context.Background()
	m, err := hub.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	nm := nats.NewMsg(m.Subject)
	for k, v := range m.Header {
		if strings.HasPrefix(k, "Pi-") {
			nm.Header[k] = v
		}
	}
	nm.Data = m.Data
	if change != nil {
		nm.Data = bytes.Clone(m.Data)
		change(nm.Data)
	}
	if _, err := hubJS.PublishMsg(ctx, nm, jetstream.WithExpectStream(eventlog.HubStream)); err != nil {
		t.Fatal(err)
	}
}

// TestDownloaderRefusesErasedLinesReplayed: n3 erases session s1, which
// n2 wrote too and whose key messages n2, away, has not destroyed yet.
// After the workstation erased s1 (its lines gone from PI_ALL) and its
// downloader restarted, the hub's operator publishes n2's first line of
// s1 again. Before, it opened (its key message still there) and, PI_ALL
// holding nothing of n2's s1 any more, was admitted as a line written
// after the erase: the erased text was back in the sessions folder. It is
// now refused as erased (it names a key message older than the erase
// event's); n3's line after the erase is copied.
func TestDownloaderRefusesErasedLinesReplayed(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	ctx := context.Background()
	lines := mkLines(4, 50, "e")
	send("n2", "s1", lines[0], 1) // hub sequence 1
	send("n2", "s1", lines[1], 2)
	send("n3", "s1", lines[2], 1)
	t.Run("before", func(t *testing.T) {
		copyFromHub(t, ws, all, keyFile, true)
		waitCount(t, all, 3)
	})
	send("n3", "s1", eventlog.EraseLine("--p--/s1.jsonl", time.Now()), 2)
	t.Run("erase", func(t *testing.T) {
		copyFromHub(t, ws, all, keyFile, true)
		waitCount(t, all, 4)
	})
	// What the replicator does with n3's erase event (PI_ALL sequence 4).
	if _, err := eventlog.EraseSession(ctx, all.JetStream(), "w1", "s1", eventlog.EraseBounds{All: 4}); err != nil {
		t.Fatal(err)
	}
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	replayHub(t, hubJS, hub, 1)
	// n2's second line again, in a version 1 envelope (its data key
	// inside, no key message named), as a hub that kept the lines of a
	// team that ran an earlier version could publish it: it named no key
	// message, so the erase's floor was not checked.
	ring, err := keyring.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	v1 := lines[1]
	v1.SrcSeq = 2
	subj, sealed := eventlog.SealLineV1(ring, "n2", "s1", &v1)
	last, err := hub.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second).Publish(ctx, subj, last.Sequence, []eventlog.Line{sealed}); err != nil {
		t.Fatal(err)
	}
	send("n3", "s1", lines[3], 3)

	gate := copyFromHub(t, ws, all, keyFile, true)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		by := gate.Stats().ByOrigin["n2"].ByReason
		return by[admit.Reason(eventlog.RejectErased)] == 2, fmt.Sprintf("rejections %v", by)
	})
	waitCount(t, all, 2)
	if got, want := allLines(t, all), "n3/2:erase,n3/3:e3"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
}

// TestDownloaderRefusesSealedWhenOff: in a team that does not encrypt, a
// teammate sealing a line under a key of its own stopped every copy to a
// machine without a keyring, which waited for a key that would never
// come (the lines after it, of every node, waited too). With encryption
// off here (PISYNC_ENCRYPT=off) such a line is refused, counted as
// `sealed`, and the lines after it are copied; once a keyring is here,
// sealed lines are opened again, as under auto.
func TestDownloaderRefusesSealedWhenOff(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	sealed := mkLines(2, 50, "e")
	send("mallory", "s1", sealed[0], 1)
	// Noise marked sealed on n3's session s5, which any hub client can
	// publish: more than the admission point takes before it quarantines
	// an origin's session, and it must not quarantine n3's.
	for i := range 10 {
		rawPublish(t, hubJS, eventlog.UpSubject("n3", "s5"), []byte(fmt.Sprint("noise ", i)), map[string]string{eventlog.HdrSeal: "2", eventlog.HdrSrcSeq: fmt.Sprint(i + 1)})
	}
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	noise, err := hub.GetLastMsgForSubject(ctx, eventlog.UpSubject("n3", "s5"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pub.Publish(ctx, eventlog.UpSubject("n3", "s5"), noise.Sequence, mkLines(2, 50, "p")); err != nil {
		t.Fatal(err)
	}

	// w1 has no keyring: its path names no file yet.
	ring := filepath.Join(t.TempDir(), "team-key.json")
	receiver := eventlog.NewCrypt(ring, "w1", false)
	receiver.NoSealing()
	gate := copyFromHubWith(t, ws, all, receiver)
	waitCount(t, all, 2)
	if got, want := allLines(t, all), "n3/0:p0,n3/0:p1"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
	s := gate.Stats()
	if m, n := s.ByOrigin["mallory"].ByReason[admit.Reason(eventlog.RejectSealed)], s.ByOrigin["n3"].ByReason[admit.Reason(eventlog.RejectSealed)]; m != 1 || n != 10 {
		t.Errorf("counted as sealed: mallory %d (want 1), n3 %d (want 10): %+v", m, n, s.ByOrigin)
	}

	// The team's key imported here: sealed lines are opened.
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ring, b, 0o600); err != nil {
		t.Fatal(err)
	}
	send("n2", "s2", sealed[1], 1)
	waitCount(t, all, 3)
	if got, want := allLines(t, all), "n3/0:p0,n3/0:p1,n2/1:e1"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
}

// TestTamperedSealedLinesQuarantineNothing: a hub client that publishes a
// sealed line of n2's again with a byte of it changed, more times than
// the admission point takes before it quarantines a session of an
// origin, has each copy refused as undecryptable, and quarantines
// nothing: what does not open names no session (its subject holds the
// session's token), so it is not n2's doing that can be told. Before,
// status listed n2's "session" (the token) as quarantined, and the log
// said its further events were passed over, while they were admitted (a
// hostile hub probe, 2026-12-07).
func TestTamperedSealedLinesQuarantineNothing(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	lines := mkLines(2, 50, "e")
	send("n2", "s1", lines[0], 1)
	hub, err := hubJS.Stream(context.Background(), eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 9 {
		replayHubAs(t, hubJS, hub, 1, func(b []byte) { b[len(b)-1-i] ^= 0x20 })
	}
	send("n2", "s1", lines[1], 2)

	gate := copyFromHub(t, ws, all, keyFile, true)
	waitCount(t, all, 2)
	s := gate.Stats()
	if n := s.ByOrigin["n2"].ByReason[admit.Reason(eventlog.RejectUndecryptable)]; n != 9 {
		t.Errorf("undecryptable %d, want 9 (%+v)", n, s.ByOrigin)
	}
	if len(s.Quarantined) > 0 {
		t.Errorf("quarantined %+v for lines that name no session", s.Quarantined)
	}
	if got, want := allLines(t, all), "n2/1:e0,n2/2:e1"; got != want {
		t.Fatalf("PI_ALL holds %s, want %s", got, want)
	}
}
