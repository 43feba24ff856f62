package eventlog_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
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
	stop := goRun(t, d)
	t.Cleanup(func() {
		stop()
		nc.Close()
	})
	return d, gate, receiver
}

// TestDownloaderHoldsWithinBounds: a node may have maxHeldPerNode
// sessions held on a machine; a sealed line of one more of its sessions is
// passed over as held-limit, for no quarantine, and the lines after it, of
// any node, are copied. Held sessions are counted and name the key they
// wait for.
func TestDownloaderHoldsWithinBounds(t *testing.T) {
	eventlog.SetParkBounds(t, 2, 1<<30)
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

// TestDownloaderWaitsWhenParkFull: with PI_PARK full, a sealed line
// without its key is not passed over: the copy waits at it, as it did
// before lines were held, and says so.
func TestDownloaderWaitsWhenParkFull(t *testing.T) {
	eventlog.SetParkBounds(t, 1000, 0)
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
