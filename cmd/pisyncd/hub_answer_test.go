package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
