package main

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
)

// TestNoAnswer: nothing listening on the control socket is "not running"
// (the inspection commands then read the store); a daemon whose socket
// takes the connection and does not answer in time is not: it says so.
func TestNoAnswer(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{StateDir: dir}
	if _, err := getControl(context.Background(), cfg, "/status"); !errors.Is(err, errNotRunning) || !strings.Contains(err.Error(), "start it (pisyncd run") {
		t.Fatalf("no socket: %v, want errNotRunning, with how to start it", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, config.ControlSocket))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = getControl(ctx, cfg, "/status")
	if err == nil || errors.Is(err, errNotRunning) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("a socket that does not answer: %v", err)
	}

	// Without a deadline of its own (events, context: five minutes), a
	// command gives up on a daemon that sends nothing after answerTimeout,
	// and says what to do.
	defer func(d time.Duration) { answerTimeout = d }(answerTimeout)
	answerTimeout = 100 * time.Millisecond
	_, err = getControl(context.Background(), cfg, "/events?session=x")
	if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "restarting it") {
		t.Fatalf("a daemon that sends nothing: %v", err)
	}
}
