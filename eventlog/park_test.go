package eventlog_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
)

// heldCopy runs w1's downloader with its state bucket, opening sealed
// lines with a team key of another team (so that n2's are held), until the
// test ends.
func heldCopy(t *testing.T, ws *embedded.Server, all *eventlog.All) (*eventlog.Downloader, *admit.Gate, *eventlog.Crypt) {
	d, gate, receiver, _ := heldCopyKeyFile(t, ws, all)
	return d, gate, receiver
}

// heldCopyKeyFile is heldCopy, returning the keyring file it reads too.
func heldCopyKeyFile(t *testing.T, ws *embedded.Server, all *eventlog.All) (*eventlog.Downloader, *admit.Gate, *eventlog.Crypt, string) {
	t.Helper()
	d, gate, receiver, keyFile, _ := startHeldCopy(t, ws, all)
	return d, gate, receiver, keyFile
}

// startHeldCopy is heldCopyKeyFile, returning a stop of its own too
// (idempotent; the test's end calls it in any case).
func startHeldCopy(t *testing.T, ws *embedded.Server, all *eventlog.All) (*eventlog.Downloader, *admit.Gate, *eventlog.Crypt, string, func()) {
	t.Helper()
	other := filepath.Join(t.TempDir(), "team-key.json")
	if err := keyring.Save(other, keyring.New(time.Now())); err != nil {
		t.Fatal(err)
	}
	receiver := eventlog.NewCrypt(other, "w1", false)
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	state, err := eventlog.OpenState(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	gate := admit.New("w1", admit.Limits{}, all, nil)
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: gate, State: state, MaxLine: 1 << 20, Crypt: receiver})
	if err != nil {
		t.Fatal(err)
	}
	run := goRun(t, d)
	stop := sync.OnceFunc(func() {
		run()
		nc.Close()
	})
	t.Cleanup(stop)
	return d, gate, receiver, other, stop
}

// TestDownloaderHoldsWithinBounds: a node may have maxHeldPerNode
// sessions held on a machine; a sealed line of one more of its sessions is
// passed over as held-limit, for no quarantine, and the lines after it, of
// any node, are copied. Held sessions are counted and name the key they
// wait for.
func TestDownloaderHoldsWithinBounds(t *testing.T) {
	eventlog.SetParkBounds(t, 2, 1<<30, 1<<30)
	hubJS, ws, all, _, send := sealedHub(t)
	for i := range 3 {
		send("n2", fmt.Sprint("s", i), mkLines(1, 50, "x")[0], 1)
	}
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n3", "p1"), 0, mkLines(2, 50, "p")); err != nil {
		t.Fatal(err)
	}
	d, gate, _ := heldCopy(t, ws, all)
	waitCount(t, all, 2) // n3's two lines, past n2's
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		st := d.Stats()
		by := gate.Stats().ByOrigin["n2"].ByReason
		return st.Held == 2 && len(st.HeldFor) == 1 && by[admit.Reason(eventlog.RejectHeldLimit)] == 1,
			fmt.Sprintf("downloader %+v, n2's rejections %v", st, by)
	})
	if q := gate.Stats().Quarantined; len(q) != 0 {
		t.Errorf("quarantined %v for held-limit", q)
	}
}

// TestDownloaderHoldsANodesShare: one node's held lines may take
// parkNodeBytes of PI_PARK; past it, a line of that node that would be
// held is passed over as held-limit, behind a held line of its session
// or as the first of another, and the copy goes on. After a restart the
// share is counted again from what PI_PARK holds. Before, one node could
// fill all of PI_PARK, and the copy then waited at its next such line,
// for every node.
func TestDownloaderHoldsANodesShare(t *testing.T) {
	eventlog.SetParkBounds(t, 1000, 1<<30, 5000) // two lines of 2,000 bytes, sealed
	hubJS, ws, all, _, send := sealedHub(t)
	// Lines that do not compress: sealing compresses first.
	noise := func(n int, prefix string) []eventlog.Line {
		out := mkLines(n, 0, prefix)
		for i := range out {
			pad := make([]byte, 1500)
			rand.Read(pad)
			raw := []byte(fmt.Sprintf(`{"type":"message","id":"%s%d","pad":%q}`, prefix, i, base64.StdEncoding.EncodeToString(pad)))
			out[i] = eventlog.NewLine(raw, fmt.Sprintf("%s%d", prefix, i), "", "message", "f.jsonl", int64(i+1))
		}
		return out
	}
	for i, l := range noise(3, "x") {
		send("n2", "s0", l, uint64(i+1))
	}
	send("n2", "s1", noise(1, "y")[0], 1)
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n3", "p1"), 0, mkLines(1, 50, "p")); err != nil {
		t.Fatal(err)
	}
	d, gate, _, _, stop := startHeldCopy(t, ws, all)
	waitCount(t, all, 1) // n3's line, past n2's
	limited := func(d *eventlog.Downloader, gate *admit.Gate, want int64) {
		t.Helper()
		testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
			st := d.Stats()
			by := gate.Stats().ByOrigin["n2"].ByReason
			return st.Held == 1 && by[admit.Reason(eventlog.RejectHeldLimit)] == want,
				fmt.Sprintf("downloader %+v, n2's rejections %v", st, by)
		})
	}
	limited(d, gate, 2) // s0's third line, s1's first
	if n := streamCount(t, ws, eventlog.ParkStream); n != 2 {
		t.Fatalf("%s holds %d messages, want s0's first two", eventlog.ParkStream, n)
	}
	stop()

	send("n2", "s2", noise(1, "z")[0], 1)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n3", "p2"), 0, mkLines(1, 50, "q")); err != nil {
		t.Fatal(err)
	}
	d, gate, _, _, _ = startHeldCopy(t, ws, all)
	waitCount(t, all, 2)
	limited(d, gate, 1) // s2's line: the share is still taken
}

// TestDownloaderWaitsWhenParkFull: with PI_PARK full, a sealed line
// without its key is not passed over: the copy waits at it, as it did
// before lines were held, and says so.
func TestDownloaderWaitsWhenParkFull(t *testing.T) {
	eventlog.SetParkBounds(t, 1000, 0, 1<<30)
	hubJS, ws, all, _, send := sealedHub(t)
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n3", "p1"), 0, mkLines(1, 50, "p")); err != nil {
		t.Fatal(err)
	}
	send("n2", "s1", mkLines(1, 50, "x")[0], 1)
	d, _, receiver := heldCopy(t, ws, all)
	waitCount(t, all, 1)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		w := receiver.Status().CopyWaiting
		return strings.Contains(w, "no team key") && d.Stats().Held == 0, fmt.Sprintf("copy waiting %q, downloader %+v", w, d.Stats())
	})
}

// TestDownloaderReleasesHeldLines: a session held for its key, with more
// lines than one release takes (about 8 MiB), goes into PI_ALL once the
// key is here: every line once, in order, after the line of another node
// the hub stored after them; then PI_PARK is empty and nothing is held.
func TestDownloaderReleasesHeldLines(t *testing.T) {
	hubJS, ws, all, keyFile, send := sealedHub(t)
	const n = 40 // of 230 KiB each: 9.2 MB
	for i, l := range mkLines(n, 230<<10, "x") {
		send("n2", "s1", l, uint64(i+1))
	}
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n3", "p1"), 0, mkLines(1, 50, "p")); err != nil {
		t.Fatal(err)
	}
	d, _, _, receiverKeys := heldCopyKeyFile(t, ws, all)
	waitCount(t, all, 1)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return d.Stats().Held == 1, fmt.Sprintf("downloader %+v", d.Stats())
	})
	team, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(receiverKeys, team, 0o600); err != nil { // the key imported
		t.Fatal(err)
	}
	waitCount(t, all, n+1)
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		return d.Stats().Held == 0, fmt.Sprintf("downloader %+v", d.Stats())
	})
	if got, want := allLines(t, all), "n3/0:p0,"+strings.Join(func() []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("n2/%d:x%d", i+1, i))
		}
		return s
	}(), ","); got != want {
		t.Fatalf("PI_ALL holds\n%s\nwant\n%s", got, want)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		n := streamCount(t, ws, eventlog.ParkStream)
		return n == 0, fmt.Sprintf("%s holds %d messages", eventlog.ParkStream, n)
	})
	// Each read's consumer went with it: left for nats.go's five minutes,
	// a release of a thousand held sessions filled the stream's thousand
	// consumers (a probe, 2026-12-07).
	if n := streamInfo(t, ws, eventlog.ParkStream).State.Consumers; n != 0 {
		t.Errorf("%s has %d consumers left after the release", eventlog.ParkStream, n)
	}
}

// streamCount is how many messages stream holds on ws.
func streamCount(t *testing.T, ws *embedded.Server, stream string) uint64 {
	t.Helper()
	return streamInfo(t, ws, stream).State.Msgs
}

// streamInfo is stream's information on ws.
func streamInfo(t *testing.T, ws *embedded.Server, stream string) *jetstream.StreamInfo {
	t.Helper()
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info
}
