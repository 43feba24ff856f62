package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/keyring"
)

// TestHubRelaysNoClearNames: a hub operator subscribed to `>` while a
// sealed session crosses sees the sealed lines, and never the session
// id, the cwd or an entry id in a subject, header or payload: not in
// the workstations' own JetStream advisories either (an API audit
// advisory quotes each request, and a consumer's filter names the
// session), which the leaf connection would carry to a hub that asks.
func TestHubRelaysNoClearNames(t *testing.T) {
	hub := startTestHub(t)
	hc, err := hub.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	var mu sync.Mutex
	var seen [][]byte
	sub, err := hc.Subscribe(">", func(m *nats.Msg) {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s %v\n", m.Subject, m.Reply, m.Header)
		b.Write(m.Data)
		mu.Lock()
		seen = append(seen, b.Bytes())
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	hc.Flush()

	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	b := e2eStation(t, "ws-b", hub.url(), ring)
	cwdMarker := randomHex(t, 16)
	sid := "0199eeee-0000-7000-8000-" + randomHex(t, 6)
	p := filepath.Join(a.cfg.SessionsDir, "--sec-"+cwdMarker+"--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	appendLine(t, p, hdrLine(sid, "/sec/"+cwdMarker))
	appendLine(t, p, msgLine("entry-"+cwdMarker[:8], "", "hello"))
	want := fileText(p)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(e2eFile(b, sid)) == want, "B has not A's session yet"
	})
	hc.Flush()
	mu.Lock()
	defer mu.Unlock()
	sealed := 0
	for _, m := range seen {
		if bytes.HasPrefix(m, []byte("pi.up.ws-a.")) {
			sealed++
		}
		for _, n := range []string{sid, cwdMarker, "entry-" + cwdMarker[:8]} {
			if bytes.Contains(m, []byte(n)) {
				t.Errorf("the hub saw %q in clear:\n%.500s", n, m)
				break
			}
		}
	}
	if sealed < 2 {
		t.Fatalf("the hub's subscriber saw %d sealed lines of %d messages: it sees nothing", sealed, len(seen))
	}
	if t.Failed() {
		var subjects []string
		for _, m := range seen {
			subjects = append(subjects, strings.SplitN(string(m), " ", 2)[0])
		}
		t.Logf("subjects seen: %v", subjects)
	}
}
