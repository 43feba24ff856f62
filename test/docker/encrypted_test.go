//go:build docker

package docker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestEncryptedStack: the compose file's default end-to-end encryption
// (the team key made by pki, mounted by the workstations only), with the
// workstations' stores encrypted at rest too (PISYNC_STORE_CIPHER). A
// marker written on ws1 reaches ws2's file, and is in no byte of any
// hub's store, of anything a hub relays, or of either workstation's state
// dir; the same search finds it in ws2's sessions folder, so it is shown
// to work (with PISYNC_ENCRYPT=off the hub checks fail).
//
// What a hub relays is read by a subscriber on `>` at hub1's client port
// while the session crosses: the hub operator's own view, after TLS ends,
// of every message the cluster routes in the account (the stack runs open
// for it: a node's credentials may subscribe to its inbox only). A packet
// capture of the TLS leaf link would show no marker whether or not the
// lines were sealed, since TLS hides them on the wire either way: it
// would prove nothing about what the hub reads.
func TestEncryptedStack(t *testing.T) {
	s := newStackEnv(t, append(append([]string{}, openEnv...), "PISYNC_STORE_CIPHER=chachapoly")...)
	marker, cwdMarker := randomHex(t, 24), randomHex(t, 12)
	sid := "01995ec0-0000-7000-8000-" + randomHex(t, 6)
	cwd := "/work/sealed-" + cwdMarker
	needles := []string{marker, cwdMarker, sid}

	relayed := subscribeAll(t, "nats://"+s.ip("hub1")+":4222")

	p1 := sessionPath(s.sessions("ws1"), cwd, sid)
	p2 := sessionPath(s.sessions("ws2"), cwd, sid)
	lines := []string{hdrLine(sid, cwd)}
	parent := ""
	for i := range 5 {
		id := fmt.Sprintf("e%d", i)
		lines = append(lines, msgLine(id, parent, fmt.Sprintf("sealed line %d: %s", i, marker)))
		parent = id
	}
	if err := appendLines(p1, lines...); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(waitFile(t, p2, len(lines), time.Minute), "\n"); !strings.Contains(got, marker) {
		t.Fatalf("ws2's file lacks the marker:\n%s", got)
	}
	// Every replica holds the lines before the hubs' disks are read.
	s.hubCaughtUp(time.Now())

	st := s.rawStatus("ws1")
	if st.StoreCipher != "chachapoly" || st.Encryption == nil || st.Encryption.CurrentKey == "" || st.Encryption.ForwardWaiting != "" {
		t.Errorf("ws1 status: store cipher %q, encryption %+v", st.StoreCipher, st.Encryption)
	}

	// The search works: ws2's sessions folder, read the same way.
	if hits := s.tarHolds("ws2", "/home/pi/.pi/agent/sessions", needles); len(hits) != len(needles) {
		t.Fatalf("ws2's sessions folder holds only %v of %v: the search is broken", hits, needles)
	}
	for _, h := range hubs {
		if hits := s.tarHolds(h, "/data/hub", needles); len(hits) > 0 {
			t.Errorf("%s's store holds %v in clear", h, hits)
		}
	}
	for _, ws := range stations {
		if hits := s.tarHolds(ws, "/home/pi/.local/state/pisyncd", needles[:2]); len(hits) > 0 {
			t.Errorf("%s's state dir (store encrypted at rest) holds %v in clear", ws, hits)
		}
	}
	all := relayed()
	sealed := 0
	for _, m := range all {
		if bytes.HasPrefix(m, []byte("pi.up.ws1.")) {
			sealed++
		}
	}
	if sealed < len(lines) {
		t.Fatalf("the subscriber on hub1 saw %d messages on pi.up.ws1.* (of %d in all), want at least %d: it does not see the relayed lines", sealed, len(all), len(lines))
	}
	for _, n := range needles {
		for _, m := range all {
			if bytes.Contains(m, []byte(n)) {
				t.Errorf("hub1 relayed %q in clear:\n%.600s", n, m)
			}
		}
	}
	t.Logf("%d messages relayed by hub1 while the session crossed, %d of them ws1's sealed lines", len(all), sealed)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// subscribeAll subscribes to `>` at url until the test ends. Its result
// returns every message seen so far: subject, headers and payload.
func subscribeAll(t *testing.T, url string) func() [][]byte {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("hub1's client listener %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	var all [][]byte
	if _, err := nc.Subscribe(">", func(m *nats.Msg) {
		var b bytes.Buffer
		b.WriteString(m.Subject + "\n")
		for k, v := range m.Header {
			b.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		b.Write(m.Data)
		mu.Lock()
		defer mu.Unlock()
		all = append(all, b.Bytes())
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() [][]byte {
		nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return append([][]byte{}, all...)
	}
}

// tarHolds copies dir out of svc's container (`docker cp`, a tar of the
// files as they are on disk, read without a shell) and returns the
// needles some file holds.
func (s *stack) tarHolds(svc, dir string, needles []string) []string {
	s.t.Helper()
	tar := s.docker(2*time.Minute, "cp", s.id(svc)+":"+dir, "-")
	if len(tar) < 1024 {
		s.t.Fatalf("docker cp %s:%s gave %d bytes", svc, dir, len(tar))
	}
	var hits []string
	for _, n := range needles {
		if strings.Contains(tar, n) {
			hits = append(hits, n)
		}
	}
	return hits
}

// encStatus is the part of `pisyncd status --json` about encryption.
type encStatus struct {
	StoreCipher string `json:"storeCipher"`
	Encryption  *struct {
		CurrentKey     string `json:"currentKey"`
		ForwardWaiting string `json:"forwardWaiting"`
	} `json:"encryption"`
}

func (s *stack) rawStatus(ws string) encStatus {
	s.t.Helper()
	out := s.docker(30*time.Second, "exec", s.id(ws), "/pisyncd", "status", "--json")
	var st encStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		s.t.Fatalf("%s status: %v: %s", ws, err, out)
	}
	return st
}
