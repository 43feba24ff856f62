package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
)

// stallBound is how long an honest session may take to reach the other
// workstation while the hub holds eve's garbage.
const stallBound = 20 * time.Second

// eveHeader publishes a session header line of eve's own session sid, with
// a correct Pi-Sha of payload.
func eveHeader(t *testing.T, e *hostileEnv, sid, file string, payload []byte) {
	t.Helper()
	e.eve.MustPublish(t, sid, testenv.Forged{ID: sid, Type: "session", File: file, Payload: payload})
}

// notObjects are header payloads that are JSON but no object.
var notObjects = []string{`[1,2]`, `"x"`, `42`, `null`, `true`}

// longName is a file name of 256 bytes: above what a file system takes
// (255), inside what a lenient pattern of pi-like names lets through.
func longName() string { return strings.Repeat("a", 250) + ".jsonl" }

// badHeaders has eve publish n bad session headers, each on a session of
// her own; kind picks, for the i-th, a payload that is no JSON object
// ("object") or a valid header naming a file too long to create ("long").
func badHeaders(t *testing.T, e *hostileEnv, n int, kind func(i int) string) {
	t.Helper()
	start := time.Now()
	for i := 0; i < n; i++ {
		sid := fmt.Sprintf("0199e5e0-0000-7000-8000-%012d", i)
		switch kind(i) {
		case "object":
			eveHeader(t, e, sid, secRel(sid), []byte(notObjects[i%len(notObjects)]))
		case "long":
			eveHeader(t, e, sid, "--evil--/"+longName(), []byte(hdrLine(sid, "/evil")))
		}
	}
	t.Logf("eve published %d bad headers in %v", n, time.Since(start).Round(time.Millisecond))
}

// TestHostileStallNotAnObject replays attack 1a: eve publishes session
// header lines whose payload is JSON but no object ([1,2], "x", …), on 50
// sessions of her own. Proves that unreadable remote headers do not stop
// replication: three times in a row, a session ann writes afterwards
// reaches bob, and one of bob's reaches ann, each within the bound.
func TestHostileStallNotAnObject(t *testing.T) {
	e := startHostile(t, nil)
	badHeaders(t, e, 50, func(int) string { return "object" })
	e.rounds(t, "0001", 3, stallBound)
}

// TestHostileStallLongFileName replays attack 1b: valid headers whose
// Pi-File names a file longer than 255 bytes, which no file system can
// create, on 50 sessions. Proves that a remote file that cannot be created
// does not stop replication of every other session (three rounds both
// ways, as above).
func TestHostileStallLongFileName(t *testing.T) {
	e := startHostile(t, nil)
	badHeaders(t, e, 50, func(int) string { return "long" })
	e.rounds(t, "0002", 3, stallBound)
}

// TestHostileStallMany replays attack 1c: 300 bad headers of both kinds.
// Proves that the honest path stays within the bound however many there
// are: no stall per bad event adding up.
func TestHostileStallMany(t *testing.T) {
	e := startHostile(t, nil)
	badHeaders(t, e, 300, func(i int) string { return []string{"object", "long"}[i%2] })
	e.rounds(t, "0003", 3, stallBound)
}

// TestHostileStallSealedWhenOff: in a team that does not encrypt
// (PISYNC_ENCRYPT=off on ann and bob, no keyring), eve runs her daemon
// with PISYNC_ENCRYPT=on and a team key of her own, so that her lines
// reach the hub sealed under a key nobody else has. Under auto a machine
// without a key waits for one at the first of them and copies nothing
// after it, from anyone, for good. Proves that under off ann refuses
// them and three rounds of new sessions cross both ways within the bound.
func TestHostileStallSealedWhenOff(t *testing.T) {
	h, run := keyedHub(t)
	e := &hostileEnv{hub: h, ann: run("ann", "off", ""), bob: run("bob", "off", "")}
	ring := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(ring, keyring.New(time.Now())); err != nil {
		t.Fatal(err)
	}
	eve := run("eve", "on", ring)
	writeSession(t, eve, "0199e5e6-0000-7000-8000-000000000001", 2)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		n := e.ann.d.gate.Stats().ByOrigin["eve"].ByReason[admit.Reason(eventlog.RejectSealed)]
		return n == 3, fmt.Sprintf("ann refused %d of eve's 3 sealed lines as sealed (%+v)", n, e.ann.d.gate.Stats().ByOrigin)
	})
	e.rounds(t, "0005", 3, stallBound)
}

// keyedHub starts a secure hub with ann, bob and eve, nodes of one team,
// and returns it with run, which starts one of them with PISYNC_ENCRYPT
// encrypt and the keyring keyFile ("": none).
func keyedHub(t *testing.T) (*secureHub, func(name, encrypt, keyFile string) *station) {
	h := startSecureHub(t)
	seeds := map[string]string{}
	for _, n := range []string{"ann", "bob", "eve"} {
		seeds[n] = h.addNode(n, "t1")
	}
	h.run()
	return h, func(name, encrypt, keyFile string) *station {
		cfg := stationConfig(t, name, "tls://localhost:"+portOnly(h.leaf))
		cfg.HubNkey, cfg.HubCA, cfg.Encrypt, cfg.KeyFile = seeds[name], filepath.Join(h.certs, "ca.pem"), encrypt, keyFile
		if err := cfg.Validate(); err != nil {
			t.Fatalf("%s: config: %v", name, err)
		}
		return runStation(t, cfg)
	}
}

// TestHostileStallOpenBatches replays attack 1d: eve starts more atomic
// batches on a session of her own than PI_HUB lets every node together
// have open (nats-server's 50 a stream), a message each, and never
// finishes them. The hub then refuses every other node's batch until they
// lapse (its batch timeout, a minute), and eve can start them again: a
// forwarder that sent a session of more than a few lines only as a batch
// stalled for as long (61 s for a session of 40 lines). Proves that
// sessions of plain lines reach the other workstation within the bound,
// both ways, while the hub still refuses batches, also behind an image
// that waits for a batch, more than a window of them; and that the image
// goes once eve's batches lapse.
func TestHostileStallOpenBatches(t *testing.T) {
	e := startHostile(t, nil)
	const eveSID = "0199e5e4-0000-7000-8000-000000000001"
	for i := range 60 {
		e.eve.OpenBatch(t, eveSID, fmt.Sprintf("eve-open-%d", i))
	}
	e.eve.Flush(t)
	e.send(t, e.ann, e.bob, "0199a000-0004-7000-8000-ann000000000", 40, stallBound)
	e.send(t, e.bob, e.ann, "0199b000-0004-7000-8000-bob000000000", 40, stallBound)
	// A line of several chunks (an image) is stored all or nothing only
	// as a batch: it waits, and a session written after it does not, even
	// one of more lines than the forwarder reads at once (a window of
	// 1,000 messages): the forwarder holds the image's session and goes
	// on past it.
	imgSID := "0199a000-0004-7000-8000-annimage0000"
	written := time.Now()
	appendLine(t, writeSession(t, e.ann, imgSID, 0), msgLine("img-0", "", strings.Repeat("A", 300<<10)))
	// One by one, 1,100 lines take 1.5-3 s, 8 s under -race (45-50 s
	// while the test stations' links went through nats-server's S2
	// writer: stationConfig): a bound of their own, still under the
	// minute eve's batches stay open (her probe below fails the test if
	// they lapsed).
	e.send(t, e.ann, e.bob, "0199a000-0004-7000-8000-ann000000001", 1100, 45*time.Second)
	if n := len(readLines(secPath(e.bob, imgSID))); n > 1 {
		t.Fatalf("bob has %d lines of the image's session while the hub takes no batch", n)
	}
	// ann says one session waits, in status and in /metrics.
	st, err := e.ann.status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Forwarder.Waiting != 1 {
		t.Errorf("ann's status: %d sessions waiting for a batch, want the image's 1", st.Forwarder.Waiting)
	}
	if got := metricValue(t, e.ann, "pisyncd_hub_forwarder_sessions_waiting"); got != 1 {
		t.Errorf("ann's pisyncd_hub_forwarder_sessions_waiting = %v, want 1", got)
	}
	// Still under attack: a batch of eve's own is refused too.
	if err := e.eve.Batch(context.Background(), eveSID, "eve-probe"); err == nil || !strings.Contains(err.Error(), "too many inflight") {
		t.Fatalf("eve's own batch while she held every open batch: %v, want the hub's refusal (too many inflight): the attack was not in effect", err)
	} else {
		t.Logf("the hub still refuses batches: %v", err)
	}
	// Once eve's batches lapse (the hub's batch timeout), the image goes.
	waitSecFile(t, e.bob, imgSID, 2, 2*time.Minute)
	t.Logf("the image's line reached bob %v after it was written, once eve's batches lapsed", time.Since(written).Round(time.Second))
	waitUntil(t, 10*time.Second, func() (bool, string) {
		st, err := e.ann.status()
		return err == nil && st.Forwarder.Waiting == 0, fmt.Sprintf("ann's status once the image went: %v, %+v", err, st.Forwarder)
	})
}

// TestHostileStallSealedUnderAuto: ann and bob share a team key under
// auto, the default; eve runs with a team key of her own, so that her
// lines reach the hub sealed under a key nobody else has. A machine used
// to stop at the first line it had no key for and copy nothing after it,
// from anyone, until that key came: with eve's, never. Proves that ann and
// bob hold eve's session aside (status and /metrics say so, naming her
// key), that three rounds of new sessions cross both ways within the bound
// while more of eve's lines arrive behind the held ones, that a restart
// keeps the session held and goes on copying, and that none of eve's
// lines is written anywhere.
func TestHostileStallSealedUnderAuto(t *testing.T) {
	h, run := keyedHub(t)
	newRing := func() (string, *keyring.Ring) {
		p := filepath.Join(t.TempDir(), "team-key.json")
		r := keyring.New(time.Now())
		if err := keyring.Save(p, r); err != nil {
			t.Fatal(err)
		}
		return p, r
	}
	team, _ := newRing()
	evesRing, eves := newRing()
	e := &hostileEnv{hub: h, ann: run("ann", "auto", team), bob: run("bob", "auto", team)}
	eve := run("eve", "on", evesRing)
	const eveSID = "0199e5e7-0000-7000-8000-000000000001"
	evePath := writeSession(t, eve, eveSID, 2)
	held := func(s *station) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
			st, err := s.status()
			return err == nil && st.Downloader != nil && st.Downloader.Held == 1 && slices.Equal(st.Downloader.HeldFor, []string{eves.Current}) && slices.Equal(st.Downloader.HeldFrom, []string{"eve"}),
				fmt.Sprintf("%s's downloader %+v (%v), want eve's session held for her key %s", s.name, st.Downloader, err, eves.Current)
		})
	}
	held(e.ann)
	held(e.bob)
	if got := metricValue(t, e.ann, "pisyncd_hub_downloader_sessions_held"); got != 1 {
		t.Errorf("ann's pisyncd_hub_downloader_sessions_held = %v, want 1", got)
	}
	if st, err := e.ann.status(); err != nil {
		t.Fatal(err)
	} else {
		var b bytes.Buffer
		if err := printStatus(&b, &st); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"sessions held for a team key ", " 1 from eve (sealed with team key " + eves.Current + ", which this machine does not have"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("ann's status does not say %q:\n%s", want, b.String())
			}
		}
	}
	// ls, which lists no held session, says they are there and why.
	stationEnv(t, e.ann.cfg)
	var ls bytes.Buffer
	if err := lsCommand(nil, &ls); err != nil {
		t.Fatal(err)
	}
	if want := "\n1 more from other machines held, not listed: sealed by eve with team key " + eves.Current + ", which this machine does not have"; !strings.Contains(ls.String(), want) {
		t.Errorf("ann's ls does not say %q:\n%s", want, ls.String())
	}
	e.rounds(t, "0006", 3, stallBound)

	// More of eve's lines, held behind the first in order; the honest
	// path still crosses.
	for i := range 5 {
		appendLine(t, evePath, msgLine(fmt.Sprintf("eve-more-%d", i), "", "more"))
	}
	e.rounds(t, "0007", 1, stallBound)

	// After a restart the session is still held, by what PI_PARK holds,
	// and the copy goes on past it.
	e.bob.stop()
	e.bob.start()
	held(e.bob)
	e.rounds(t, "0008", 2, stallBound)

	for _, s := range []*station{e.ann, e.bob} {
		if _, err := os.Stat(secPath(s, eveSID)); err == nil {
			t.Errorf("%s wrote eve's session without her key", s.name)
		}
	}
}
