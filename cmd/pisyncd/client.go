package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pisyncd/pisyncd/config"
)

// What the inspection commands (status, events, ls, context, tail) share:
// talking to the running daemon over its control socket, and falling back
// to the store itself when no daemon runs.

// errNotRunning: the control socket does not answer.
var errNotRunning = errors.New("pisyncd is not running")

func getControl(ctx context.Context, cfg *config.Config, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://pisyncd"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := controlClient(cfg.StateDir).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w (no answer on %s)", errNotRunning, filepath.Join(cfg.StateDir, controlSocket))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("daemon: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// askDaemon asks the running daemon for path and hands the answer to
// fromDaemon. When no daemon runs, it opens the store itself (taking the
// state dir lock) and calls fromStore instead.
func askDaemon(ctx context.Context, cfg *config.Config, path string, fromDaemon func(io.Reader) error, fromStore func(*Daemon) error) error {
	resp, err := getControl(ctx, cfg, path)
	if err == nil {
		defer resp.Body.Close()
		return fromDaemon(resp.Body)
	}
	if !errors.Is(err, errNotRunning) {
		return err
	}
	d, err := OpenStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer d.Close()
	return fromStore(d)
}

// reorder moves flags before positional arguments, so `events ID --json`
// works as well as `events --json ID`. valued names the flags that take a
// value in the next argument (--leaf ID).
func reorder(args []string, valued ...string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && slices.Contains(valued, name) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	return append(flags, pos...)
}
