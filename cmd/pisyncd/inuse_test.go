package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestListenerInUse: a listener whose address another program holds fails
// with the setting that names it and what to do, for the daemon's NATS
// listener (nats-server says it in words) and its HTTP listener (the
// system's error, kept wrapped); other errors are left as they are.
func TestListenerInUse(t *testing.T) {
	held, err := net.Listen("tcp", testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	discard := slog.New(slog.DiscardHandler)
	says := func(what string, err error, setting string) {
		t.Helper()
		for _, w := range []string{setting + " " + addr + " is taken", "set " + setting + " to a free address", "address already in use"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: err %v, want it to say %q", what, err, w)
			}
		}
	}

	cfg := stationConfig(t, "ws-inuse", "")
	cfg.HubURLs, cfg.Listen = nil, addr
	d, err := OpenStore(context.Background(), cfg, discard)
	if err == nil {
		d.Close()
	}
	says("the NATS listener", err, "PISYNC_LISTEN")

	cfg = stationConfig(t, "ws-inuse", "")
	cfg.HubURLs, cfg.HTTPAddr = nil, addr
	d, err = OpenDaemon(context.Background(), cfg, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Run(context.Background())
	says("the HTTP listener", err, "PISYNC_HTTP_ADDR")
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("the HTTP listener's error no longer wraps the system's: %v", err)
	}

	other := errors.New("embedded: something else at " + addr)
	if got := inUse(other, listener{"PISYNC_LISTEN", addr}); got != other {
		t.Errorf("another error was changed: %v", got)
	}
}
