package watch

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	b := newBudget(100)
	if n, ok := b.tryAcquire(60); !ok || n != 60 {
		t.Fatalf("tryAcquire(60) = %d %v", n, ok)
	}
	if _, ok := b.tryAcquire(50); ok {
		t.Fatal("tryAcquire(50) fit into 40")
	}
	// A request larger than the budget waits for all of it.
	got := make(chan int64, 1)
	go func() {
		n, err := b.acquire(context.Background(), 500)
		if err != nil {
			t.Error(err)
		}
		got <- n
	}()
	waitFor(t, 5*time.Second, func() (bool, string) {
		_, _, w := b.state()
		return w == 1, "waiting"
	})
	// Nobody passes a waiter, even where there is room.
	if _, ok := b.tryAcquire(10); ok {
		t.Fatal("tryAcquire passed a waiter")
	}
	b.release(60)
	if n := <-got; n != 100 {
		t.Fatalf("a request of 500 took %d, want the whole 100", n)
	}
	// Cancelled while waiting: nothing taken, and the next in line goes.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.acquire(ctx, 10)
		errc <- err
	}()
	waitFor(t, 5*time.Second, func() (bool, string) {
		_, _, w := b.state()
		return w == 2, "waiting"
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel: %v", err)
	}
	b.release(100)
	if used, peak, _ := b.state(); used != 0 || peak != 100 {
		t.Fatalf("used %d peak %d", used, peak)
	}
}

// TestBudgetTryAcquireAll: exactly what is asked or nothing, never the
// clamped part of a request over the whole budget.
func TestBudgetTryAcquireAll(t *testing.T) {
	b := newBudget(100)
	if b.tryAcquireAll(101) {
		t.Fatal("took a request over the whole budget")
	}
	if !b.tryAcquireAll(60) {
		t.Fatal("60 of 100 free: refused")
	}
	if b.tryAcquireAll(41) {
		t.Fatal("41 with 40 free: taken")
	}
	if held, _, _ := b.state(); held != 60 {
		t.Fatalf("held %d after the refusals, want 60", held)
	}
}
