package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/keyring"
)

// TestJoinBeforeTheKeySendsNothingInClear: a machine joins a team that
// encrypts under PISYNC_ENCRYPT=auto (the default) before its team key is
// imported. Proves that it forwards none of its lines (the hub holds
// nothing of it), says why in status, and that once the key is imported
// its session reaches a teammate whole, sealed. Before, it sent its lines
// to the hub in clear, where teammates under on refused them, so that its
// session never reached them (a newcomer probe on 2026-12-07).
func TestJoinBeforeTheKeySendsNothingInClear(t *testing.T) {
	hub := startTestHub(t)
	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	sidA := "0199eeee-0001-7000-8000-" + randomHex(t, 12)
	writeSession(t, a, sidA, 2)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		n, err := hub.count("pi.up.ws-a.>")
		return err == nil && n == 3, fmt.Sprintf("the hub holds %d of ws-a's 3 lines (%v)", n, err)
	})

	keyFile := filepath.Join(t.TempDir(), "team-key.json")
	c := newStationWith(t, "ws-c", hub.url(), "", func(cfg *config.Config) { cfg.Encrypt, cfg.KeyFile = "auto", keyFile })
	sidC := "0199eeee-0002-7000-8000-" + randomHex(t, 12)
	pc := writeSession(t, c, sidC, 3)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := c.status()
		return err == nil && st.Encryption != nil && strings.Contains(st.Encryption.ForwardWaiting, "the team encrypts") && st.Encryption.HubSealed != "",
			fmt.Sprintf("ws-c's encryption status %+v (%v)", st.Encryption, err)
	})
	if note := encryptionNote(&encryptionStatus{Mode: "auto", CryptStatus: c.d.crypt.Status()}); !strings.Contains(note, "key import") {
		t.Errorf("status says %q: no word of the fix", note)
	}
	// key init there, where key import was meant, is refused: it would
	// begin a team of one, whose lines no teammate could read (before,
	// it did so without a word: a probe, 2026-12-07).
	stationEnv(t, c.cfg)
	t.Setenv("PISYNC_HUB_URLS", "") // a shell without the service's settings: the daemon is asked
	t.Setenv("PISYNC_KEY_FILE", keyFile)
	if code, out, errOut := mainIn(t, "key", "init"); code != 1 || !strings.Contains(errOut, "encrypts already") || !strings.Contains(errOut, "key import") {
		t.Errorf("key init on ws-c: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(keyFile); err == nil {
		t.Fatalf("the refused key init wrote %s", keyFile)
	}
	// The tailer has published the three lines (status waited on the
	// forwarder's refusal, which reads them); none is on the hub.
	if n, err := hub.count("pi.up.ws-c.>"); err != nil || n != 0 {
		t.Fatalf("the hub holds %d message(s) of ws-c, which has no team key (%v)", n, err)
	}

	carryKey(t, a, c)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(secPath(a, sidC)) == fileText(pc), fmt.Sprintf("ws-a has %d of %d bytes of ws-c's session", len(fileText(secPath(a, sidC))), len(fileText(pc)))
	})
	for _, m := range hubMsgs(t, hub, "pi.up.ws-c.>") {
		if m.Header.Get("Pi-Seal") == "" {
			t.Errorf("ws-c's message %d on the hub is in clear", m.Sequence)
		}
	}
}
