package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
	srv := httptest.NewServer(limitStreams(follow, 2))
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
