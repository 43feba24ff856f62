package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/replicate"
)

// TestStatusSaysWhatIsNotYetOnTheHub: status counts the messages written
// here that the hub does not hold yet, 0 once it holds them all: whether
// the machine may go offline. (Before, only the lines forwarded so far and
// whether the hub was reachable: nothing said whether anything waited.)
func TestStatusSaysWhatIsNotYetOnTheHub(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	sid := "0199eeee-0000-7000-8000-0000000000f1"
	path := filepath.Join(a.cfg.SessionsDir, sessionRel("/work/unsent", sid))
	mustWriteLines(t, path, append([]string{hdrLine(sid, "/work/unsent")}, chain("a", "", 1, "first")...))
	unsent := func(want int64) func() (bool, string) {
		return func() (bool, string) {
			st, err := a.status()
			if err != nil || st.Forwarder == nil {
				return false, fmt.Sprint(err)
			}
			return st.Forwarder.Unsent == want && st.Tailer.LinesPublished == int64(2+3*min(want, 1)),
				fmt.Sprintf("unsent %d (want %d), published %d, forwarded %d", st.Forwarder.Unsent, want, st.Tailer.LinesPublished, st.Forwarder.Forwarded)
		}
	}
	waitUntil(t, 30*time.Second, unsent(0))

	hub.stop()
	for _, l := range chain("b", "a00000", 3, "while the hub is away") {
		appendLine(t, path, l)
	}
	waitUntil(t, 30*time.Second, unsent(3))
	hub.start()
	waitUntil(t, 60*time.Second, func() (bool, string) {
		st, err := a.status()
		if err != nil {
			return false, err.Error()
		}
		return st.Forwarder.Unsent == 0 && st.Tailer.LinesPublished == 5, fmt.Sprintf("unsent %d, published %d", st.Forwarder.Unsent, st.Tailer.LinesPublished)
	})
}

// TestStatusSaysForwardingWaitsForTheKey: with end-to-end encryption on
// and no team key, status says the forwarder waits for the key, not that
// the hub is unreachable and the lines go when it is.
func TestStatusSaysForwardingWaitsForTheKey(t *testing.T) {
	st := &Status{
		HubURLs: []string{"tls://hub:7422"}, Forwarder: &eventlog.ForwarderStats{Unsent: 3}, Downloader: &eventlog.DownloaderStats{Connected: true}, Replicator: &replicate.Stats{},
		Encryption: &encryptionStatus{Mode: "on", CryptStatus: eventlog.CryptStatus{ForwardWaiting: eventlog.ErrNoTeamKey.Error()}},
	}
	var out strings.Builder
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "forwarder waits for the team key") || !strings.Contains(s, "3 messages written here (they wait for the team key") || strings.Contains(s, "when the hub is reachable") {
		t.Errorf("status:\n%s", s)
	}
}

// TestStatusNotOnTheHubWhileTheStoreFails: while this machine's store
// refuses writes (a full disk), nothing forwarded waits, but lines pi
// wrote do: status does not say everything written here is on the hub
// (it did: a files probe, 2026-12-07).
func TestStatusNotOnTheHubWhileTheStoreFails(t *testing.T) {
	for _, c := range []struct {
		store *embedded.StoreStats
		want  string
	}{
		{&embedded.StoreStats{State: embedded.StoreOK}, "0 (everything written here is on the hub)"},
		{&embedded.StoreStats{State: embedded.StoreFailing, Error: "no space left on device"}, "lines pi wrote wait for the store first"},
	} {
		st := &Status{
			HubURLs: []string{"tls://hub:7422"}, Forwarder: &eventlog.ForwarderStats{}, Downloader: &eventlog.DownloaderStats{Connected: true}, Replicator: &replicate.Stats{},
			Store: c.store,
		}
		var out strings.Builder
		if err := printStatus(&out, st); err != nil {
			t.Fatal(err)
		}
		if s := out.String(); !strings.Contains(s, c.want) {
			t.Errorf("store %s: status lacks %q:\n%s", c.store.State, c.want, s)
		}
	}
}

// TestStatusSaysWhyRemoteLinesWait: lines held back by a partial last line
// of their file here are said to be, with a session's id (status said
// "remote lines waiting 3" alone: a files probe, 2026-12-07).
func TestStatusSaysWhyRemoteLinesWait(t *testing.T) {
	st := &Status{
		HubURLs: []string{"tls://hub:7422"}, Forwarder: &eventlog.ForwarderStats{}, Downloader: &eventlog.DownloaderStats{Connected: true},
		Replicator: &replicate.Stats{Waiting: 3, WaitingForPartial: 1, PartialExample: "0199eeee-0000-7000-8000-0000000000f1"},
	}
	var out strings.Builder
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "3 (1 session whose file here ends in a partial line, 0199eeee-0000-7000-8000-0000000000f1 among them") {
		t.Errorf("status:\n%s", s)
	}
}

// TestStatusHeldKeysBounded: a thousand sessions held for their key
// messages are a row of three names and a count, not of every one (a row
// of 25 KB: a verifying probe, 2026-12-07).
func TestStatusHeldKeysBounded(t *testing.T) {
	var keys []string
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("(key message %d)", i+1))
	}
	st := &Status{
		HubURLs: []string{"tls://hub:7422"}, Forwarder: &eventlog.ForwarderStats{}, Replicator: &replicate.Stats{},
		Downloader: &eventlog.DownloaderStats{Connected: true, Held: 1000, HeldFor: keys, HeldFrom: []string{"a"}},
	}
	var out strings.Builder
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "team key (key message 1), (key message 2), (key message 3) and 997 more") || len(s) > 8<<10 {
		t.Errorf("status (%d bytes):\n%.2000s", len(s), s)
	}
}

// TestStatusUnsentUnknown: when this machine's store does not answer in
// time, status does not say that nothing waits for the hub: --json says -1
// and the text says it is unknown. It said 0, "everything written here is
// on the hub", with 90,000 lines unsent (a probe under a load of 10,
// 2026-12-07).
func TestStatusUnsentUnknown(t *testing.T) {
	d := &Daemon{}
	if n := d.unsent(t.Context(), eventlog.Info{}, context.DeadlineExceeded, 150203); n != -1 {
		t.Errorf("unsent with the store's info unknown = %d, want -1", n)
	}
	if n := d.unsent(t.Context(), eventlog.Info{LastSeq: 7, Messages: 7}, nil, 7); n != 0 {
		t.Errorf("unsent with everything forwarded = %d, want 0", n)
	}
	st := &Status{
		HubURLs: []string{"tls://hub:7422"}, Forwarder: &eventlog.ForwarderStats{Through: 150203, Unsent: -1}, Downloader: &eventlog.DownloaderStats{Connected: true}, Replicator: &replicate.Stats{},
		StreamError: "eventlog: stream info: context deadline exceeded",
	}
	var out strings.Builder
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "unknown: this machine's store did not answer") || strings.Contains(s, "everything written here is on the hub") {
		t.Errorf("status:\n%s", s)
	}
}
