package foreground

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// busy reports whether g holds background work back: with ctx already
// ended, Wait returns at once, nil only when nothing is under way.
func busy(g *Gate) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return errors.Is(g.Wait(ctx, time.Hour), context.Canceled)
}

func TestGate(t *testing.T) {
	g := New()
	if busy(g) {
		t.Fatal("a new gate holds back")
	}
	leave1 := g.Enter()
	leave2 := g.Enter()
	if !busy(g) {
		t.Fatal("work under way does not hold back")
	}
	// The bound: a stream of queries slows the background, never stops it.
	if err := g.Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Wait past its bound: %v", err)
	}
	leave1()
	leave1() // once only: the other's work is still under way
	if !busy(g) {
		t.Fatal("one of two left: no longer held back")
	}
	leave2()
	if busy(g) {
		t.Fatal("all work left: still held back")
	}
	leave := g.Enter()
	if !busy(g) {
		t.Fatal("entered again: not held back")
	}
	leave()

	var none *Gate
	none.Enter()()
	if busy(none) {
		t.Fatal("a nil gate holds back")
	}
}

func TestGateHandler(t *testing.T) {
	g := New()
	var during bool
	h := g.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { during = busy(g) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/context", nil))
	if !during || busy(g) {
		t.Fatalf("held back during the request: %v, after it: %v", during, busy(g))
	}
}

// TestAndIdle: the waiter holds back while the gate does or while any idle
// channel is open, and never past its bound.
func TestAndIdle(t *testing.T) {
	g := New()
	copying := make(chan struct{}) // open: a catch-up under way
	done := make(chan struct{})
	close(done)
	var idle <-chan struct{} = copying
	w := g.AndIdle(func() <-chan struct{} { return done }, func() <-chan struct{} { return idle })
	held := func() bool {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return errors.Is(w.Wait(ctx, time.Hour), context.Canceled)
	}
	if !held() {
		t.Fatal("a catch-up under way does not hold back")
	}
	if err := w.Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Wait past its bound: %v", err)
	}
	idle = done
	if held() {
		t.Fatal("holds back with nothing under way")
	}
	leave := g.Enter()
	if !held() {
		t.Fatal("foreground work does not hold back")
	}
	leave()
	if held() {
		t.Fatal("holds back once the foreground work left")
	}
	var nilGate *Gate
	if err := nilGate.AndIdle().Wait(context.Background(), time.Hour); err != nil {
		t.Fatal(err)
	}
}
