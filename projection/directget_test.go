package projection

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
)

// A direct get reads its reply through a channel of its batch's size: with
// nats.go's SubscribeSync each request allocated a 65,536-slot channel
// (512 KiB), and a restart that reads back 10,000 sessions' first messages
// allocated 2.6 GB that way.
func TestDirectGetAllocatesLittle(t *testing.T) {
	n := startNode(t, "", t.TempDir())
	subj := eventlog.LocalSubject(testNode, "0199aaaa-0000-7000-8000-000000000001")
	for i := range 3 {
		if err := n.nc.Publish(subj, []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	read := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got := 0
		if err := directGet(ctx, n.nc, eventlog.LocalStream, subj, 1, firstBatch, firstBatchBytes, func(*nats.Msg, uint64) { got++ }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		got := read()
		return got == 3, "stored: " + strconv.Itoa(got)
	})
	const reads = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range reads {
		if got := read(); got != 3 {
			t.Fatalf("direct get: %d messages, want 3", got)
		}
	}
	runtime.ReadMemStats(&after)
	// Whatever else the process allocates meanwhile (the server, the
	// worker) is counted too: the bound is far above a read's few
	// kilobytes and far below the 512 KiB a read took.
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 128<<10 {
		t.Fatalf("a direct get of 3 messages allocated %d bytes", per)
	}
}
