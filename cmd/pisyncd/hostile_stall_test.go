package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
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
