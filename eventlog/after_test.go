package eventlog_test

import (
	"context"
	"testing"
)

// TestAfter: what PI_LOCAL holds after a sequence, as status counts it
// unsent. Messages an erase purged before they were forwarded are not
// counted: before, status counted the sequences, and said "keep this
// machine online" with nothing left to send (a probe, 2026-12-07).
func TestAfter(t *testing.T) {
	lg := openLog(t)
	ctx := context.Background()
	a, _, err := lg.Publish(ctx, "s-a", 0, mkLines(3, 10, "a")) // 1-3
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := lg.Publish(ctx, "s-b", 0, mkLines(2, 10, "b")); err != nil { // 4-5
		t.Fatal(err)
	}
	count := func(seq uint64) uint64 {
		t.Helper()
		info, err := lg.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n, err := lg.After(ctx, seq, info)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for seq, want := range map[uint64]uint64{0: 5, a: 2, 4: 1, 5: 0, 9: 0} {
		if got := count(seq); got != want {
			t.Errorf("after %d: %d, want %d", seq, got, want)
		}
	}
	// s-b, the last two, deleted (as an erase deletes a session's).
	for _, seq := range []uint64{4, 5} {
		if err := lg.Stream().SecureDeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	// (After 2 it says 3, the sequences 3 to 5, where one is held: the
	// forwarder, once it has 3, is past the two erased.)
	for seq, want := range map[uint64]uint64{0: 3, a: 0, 4: 0} {
		if got := count(seq); got != want {
			t.Errorf("after the purge, after %d: %d, want %d", seq, got, want)
		}
	}
	// Everything deleted.
	for _, seq := range []uint64{1, 2, 3} {
		if err := lg.Stream().SecureDeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	if got := count(0); got != 0 {
		t.Errorf("after deleting all, after 0: %d, want 0", got)
	}
}
