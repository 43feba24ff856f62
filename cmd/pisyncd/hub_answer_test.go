package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/config"
)

// TestHubNodeSilentIsNotAbsent: a hub node whose control socket takes the
// request and answers nothing (a cluster electing leaders, or without
// quorum) is said to be running and not answering, with what to do; only
// a socket nothing listens on is "no hub node runs here". (Before, hub
// usage interrupted after a node of three was killed said no hub node ran
// beside a running one: a cluster probe, 2026-12-07.)
func TestHubNodeSilentIsNotAbsent(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Hub{StateDir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := doHub(ctx, cfg, http.MethodGet, "/usage"); !errors.Is(err, errNoHubHere) {
		t.Errorf("no socket: %v, want %v", err, errNoHubHere)
	}

	ln, err := net.Listen("unix", filepath.Join(dir, config.ControlSocket))
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		held.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	held.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read and never answered
			mu.Unlock()
		}
	})
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = doHub(ctx, cfg, http.MethodGet, "/usage")
	if err == nil || errors.Is(err, errNoHubHere) || !strings.Contains(err.Error(), "did not answer in time") || !strings.Contains(err.Error(), "quorum") {
		t.Errorf("a silent hub node: %v", err)
	}
}

// TestStatusNamesTheHubNode: status names the hub node the link is made
// to, and its address: with several hub URLs, or a cluster whose nodes
// advertise each other, it may be none the settings name (a cluster
// probe, 2026-12-07, found workstations on nodes their settings did not
// name, and status listing only those).
func TestStatusNamesTheHubNode(t *testing.T) {
	hub := startTestHub(t)
	a := newStation(t, "ws-a", hub.url(), "")
	var st Status
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var err error
		st, err = a.status()
		return err == nil && st.HubPeer != "", fmt.Sprintf("hub peer %q (%v)", st.HubPeer, err)
	})
	if want := "hub-1 at 127.0.0.1:" + portOnly(hub.leaf); st.HubPeer != want {
		t.Errorf("hub peer %q, want %q", st.HubPeer, want)
	}
	var out strings.Builder
	if err := printStatus(&out, &st); err != nil || !strings.Contains(out.String(), "up, to hub-1 at 127.0.0.1:") {
		t.Errorf("status text (%v):\n%s", err, out.String())
	}
}

// TestTeamUsageErrorSaysWhy: a team's usage the hub's JetStream did not
// answer says what that silence means; another error is as it is.
func TestTeamUsageErrorSaysWhy(t *testing.T) {
	for _, err := range []error{context.DeadlineExceeded, fmt.Errorf("hub usage: %w", nats.ErrNoResponders), nats.ErrTimeout} {
		if got := teamUsageError(err); !strings.HasPrefix(got, err.Error()) || !strings.Contains(got, "NO quorum") {
			t.Errorf("%v: %q", err, got)
		}
	}
	if got := teamUsageError(errors.New("permission denied")); got != "permission denied" {
		t.Errorf("another error: %q", got)
	}
}
