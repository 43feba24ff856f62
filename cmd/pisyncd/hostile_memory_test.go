package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// liveHeap is the process's live heap after a collection: the hub, both
// workstations and eve all run in this process.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestHostileChunkMemory replays attack 2: eve publishes the first chunks
// of split lines whose last chunk never comes (Pi-Chunk i/1000000, 256 KiB
// each), on many sessions, 48 MiB in all. Proves that a workstation does
// not hold what a peer announces but never finishes: the live heap grows
// by far less than what was published (under a quarter, and under 64 MiB),
// and the honest path still works afterwards.
func TestHostileChunkMemory(t *testing.T) {
	e := startHostile(t, func(c *config.Config) { c.MaxLine = 4 << 20 })
	const subjects, chunks = 12, 16
	published := uint64(subjects * chunks * eventlog.MaxChunk)
	before := liveHeap()
	start := time.Now()
	payload := make([]byte, eventlog.MaxChunk)
	for s := 0; s < subjects; s++ {
		sid := fmt.Sprintf("0199e5e2-0000-7000-8000-%012d", s)
		var nonce [16]byte
		rand.Read(nonce[:])
		sum := sha256.Sum256(nonce[:])
		sha := hex.EncodeToString(sum[:]) // of a line that never comes
		for i := 1; i <= chunks; i++ {
			rand.Read(payload) // random: nothing on the way can compress it
			e.eve.MustPublish(t, sid, testenv.Forged{
				ID: fmt.Sprintf("eve-%d", s), Type: "message", File: secRel(sid), Sha: sha,
				Chunk: fmt.Sprintf("%d/1000000", i), Payload: payload,
			})
		}
	}
	t.Logf("eve published %d MiB in %d chunks on %d sessions in %v", published>>20, subjects*chunks, subjects, time.Since(start).Round(time.Millisecond))
	// Both workstations have copied and read all of it once a session
	// written after it has crossed each way.
	e.rounds(t, "0004", 1, stallBound)

	// The embedded servers keep recently read blocks cached for a few
	// seconds: wait for the heap to settle, up to a limit.
	limit := min(published/4, 64<<20)
	var growth int64
	waitUntil(t, 45*time.Second, func() (bool, string) {
		growth = int64(liveHeap()) - int64(before)
		return growth < int64(limit), fmt.Sprintf("live heap grew by %d MiB after eve published %d MiB (limit %d MiB)", growth>>20, published>>20, limit>>20)
	})
	t.Logf("live heap grew by %.1f MiB after eve published %d MiB", float64(growth)/(1<<20), published>>20)
}
