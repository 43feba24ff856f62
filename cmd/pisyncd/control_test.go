package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
)

// TestTailsLeaveRoomForCommands: past maxTails a tail is refused at once,
// with the bound and what to do, where 256 tails held every connection of
// the control socket and status waited until its deadline said the daemon
// was stuck (a probe, 2026-12-07); one that ends makes room again.
func TestTailsLeaveRoomForCommands(t *testing.T) {
	if maxTails >= maxControlConns {
		t.Fatalf("maxTails %d leaves no connection of the %d for the other commands", maxTails, maxControlConns)
	}
	started, release := make(chan struct{}), make(chan struct{})
	follow := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusOK)
		rw.(http.Flusher).Flush()
		started <- struct{}{}
		<-release
	})
	srv := httptest.NewServer(limitTails(follow, 2))
	defer srv.Close()
	get := func() (*http.Response, error) { return http.Get(srv.URL) }
	var open []*http.Response
	for range 2 {
		resp, err := get()
		if err != nil {
			t.Fatal(err)
		}
		<-started
		open = append(open, resp)
	}
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "2 tails are open already") {
		t.Errorf("a third tail: %s %q", resp.Status, b)
	}
	release <- struct{}{} // the first ends; its slot is given back as its handler returns
	open[0].Body.Close()
	waitUntil(t, 10*time.Second, func() (bool, string) {
		if resp, err = get(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return false, "a tail once one ended: " + resp.Status
		}
		return true, ""
	})
	<-started
	close(release)
	resp.Body.Close()
	open[1].Body.Close()
}

// busyDaemon is a control socket in a state dir of its own whose daemon
// takes each request and answers none until the test ends; taken is
// closed when the first request has come.
func busyDaemon(t *testing.T) (state string, taken <-chan struct{}) {
	state = t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(state, config.ControlSocket))
	if err != nil {
		t.Fatal(err)
	}
	came, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(came) })
		<-release
	})}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return state, came
}

// TestEraseInterruptedSaysItGoesOn: Ctrl-C on `pisyncd erase` while the
// daemon erases says that the daemon goes on and how to see it done,
// where it said that the daemon may be stuck and restarting it mends it
// (a probe, 2026-12-07: the daemon finished the erase 30 s later).
func TestEraseInterruptedSaysItGoesOn(t *testing.T) {
	state, taken := busyDaemon(t) // the erase begun; it takes long
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-taken
		cancel() // Ctrl-C
	}()
	_, err := eraseViaDaemon(ctx, &config.Config{StateDir: state}, "0199aaaa-0000-7000-8000-0000000000e1")
	if err == nil || !strings.Contains(err.Error(), "the daemon goes on with the erase") || strings.Contains(err.Error(), "stuck") {
		t.Errorf("erase interrupted: %v", err)
	}
}

// TestInterruptedWithACauseIsNoStuckDaemon: a command interrupted while
// the daemon works on its answer says so, when the signal ends its
// request with its own cause ("received interrupt") rather than
// context.Canceled too: that was taken for a stuck daemon (a verifying
// probe, 1,100 tails, 2026-12-07).
func TestInterruptedWithACauseIsNoStuckDaemon(t *testing.T) {
	state, taken := busyDaemon(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-taken
		cancel(errors.New("received interrupt")) // as signalContext does
	}()
	_, err := getControl(ctx, &config.Config{StateDir: state}, "/tail")
	if err == nil || !strings.Contains(err.Error(), "interrupted before pisyncd answered") || strings.Contains(err.Error(), "stuck") {
		t.Errorf("interrupted: %v", err)
	}
}
