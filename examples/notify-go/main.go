// Command notify-go is an example subscriber of pisyncd, in Go: it prints a
// line each time an assistant turn ends in a pi session (on this machine
// and, with a hub, on every machine of the team), with what the turn cost.
//
// It reads the daemon's streams through the local listener, as the
// read-only reader whose nkey the daemon writes when PISYNC_LISTEN is set,
// live and by direct get (follow.go; docs/SUBSCRIBING.md):
//
//	PISYNC_LISTEN=127.0.0.1:4223 pisyncd &
//	go run ./examples/notify-go                 # from now on
//	go run ./examples/notify-go -from-start     # everything stored first
//
// Output, one line a turn:
//
//	turn ended: session 0198…  entry 5e1f… on laptop: stop, $0.012 (anthropic/claude-sonnet-4-5)
//
// A turn is the assistant messages since the last user message; it ends
// with an assistant message whose stopReason is not "toolUse". Replace the
// Printf in notify with a desktop notification, a webhook or a bill.
package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "notify-go:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("notify-go", flag.ContinueOnError)
	credsFile := fs.String("context", defaultContext(), "the daemon's listener credentials (STATE_DIR/client-context.json)")
	fromStart := fs.Bool("from-start", false, "read everything the streams hold first, then follow")
	count := fs.Int("count", 0, "stop after this many turns (0: never)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the usage, which Parse printed
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// A reconnect (the daemon restarted, or the connection broke) is
	// told to the loop below, which owns the followers: nats.go
	// subscribes again, but what was stored meanwhile is read by
	// catchUp.
	reconnected := make(chan struct{}, 1)
	nc, err := connect(*credsFile, func() {
		select {
		case reconnected <- struct{}{}:
		default: // one catch-up pending covers every reconnect before it
		}
	})
	if err != nil {
		return err
	}
	defer nc.Close()

	// PI_LOCAL holds this machine's lines, PI_ALL (with a hub) every
	// machine's. The live subscriptions come first, so that nothing stored
	// from now on is missed; a blocking handler keeps messages in nats.go's
	// subscription, whose limits are far above a burst.
	followers := []*follower{{nc: nc, stream: "PI_LOCAL", filter: "pi.evt.>"}, {nc: nc, stream: "PI_ALL", filter: "pi.all.>"}}
	byStream := map[string]*follower{}
	msgs := make(chan *nats.Msg, 256)
	for _, f := range followers {
		byStream[f.stream] = f
		sub, err := nc.Subscribe(f.filter, func(m *nats.Msg) {
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", f.stream, err)
		}
		defer sub.Unsubscribe()
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	// This machine's node id is the one of PI_LOCAL's subjects,
	// pi.evt.<node>.<sid>; PI_ALL holds this machine's lines too (they
	// went round the hub), which PI_LOCAL gave already.
	t := newTurns("")
	for _, f := range followers {
		last, subj, err := f.last()
		if err != nil {
			return err
		}
		t.learnSelf(subj) // PI_LOCAL's only: it takes pi.evt subjects
		f.next = last + 1
		if *fromStart {
			f.next = 1
		}
	}
	fmt.Fprintf(stderr, "notify-go: following the sessions (this node: %s)\n", cmp.Or(t.self, "known at its first line"))

	n := 0
	hand := func(m *nats.Msg) {
		if line, ok := t.add(m.Subject, m.Header, m.Data); ok && (*count == 0 || n < *count) {
			fmt.Fprintln(stdout, line)
			n++
		}
	}
	if *fromStart {
		for _, f := range followers {
			if err := f.fill(ctx, 0, hand); err != nil {
				return err
			}
		}
	}
	// A catch-up that fails (the daemon answers no reads yet, just
	// started) is tried again each second until it is done.
	var retry <-chan time.Time
	catchUp := func() error {
		retry = nil
		for _, f := range followers {
			err := f.catchUp(ctx, hand)
			if errors.Is(err, errAhead) {
				return err
			}
			if err != nil {
				fmt.Fprintf(stderr, "notify-go: catching up after a reconnect: %v; trying again\n", err)
				retry = time.After(time.Second)
				return nil
			}
		}
		return nil
	}
	for *count == 0 || n < *count {
		select {
		case <-ctx.Done():
			return nil
		case <-reconnected:
			if err := catchUp(); err != nil {
				return err
			}
		case <-retry:
			if err := catchUp(); err != nil {
				return err
			}
		case m := <-msgs:
			f := byStream[m.Header.Get("Nats-Stream")]
			if f == nil {
				continue
			}
			if err := f.live(ctx, m, hand); err != nil {
				return err
			}
		}
	}
	return nil
}

// connect reads the credentials file (a nats CLI context: url, and nkey,
// the path of the user's seed) and connects as the listener's read-only
// user, reconnecting for as long as it runs (a daemon restart), and
// calling reconnected after each reconnect.
func connect(path string, reconnected func()) (*nats.Conn, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("credentials (is the daemon running with PISYNC_LISTEN set?): %w", err)
	}
	var c struct{ URL, Nkey string }
	if err := json.Unmarshal(b, &c); err != nil || c.Nkey == "" {
		return nil, fmt.Errorf("credentials %s: not a pisyncd context file (url, nkey)", path)
	}
	seed, err := nats.NkeyOptionFromSeed(c.Nkey)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return nats.Connect(c.URL, seed, nats.Name("notify-go"), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected() }))
}

// defaultContext is where the daemon writes the credentials with the
// default state dir (PISYNC_STATE_DIR overrides it, as for the daemon).
func defaultContext() string {
	dir := os.Getenv("PISYNC_STATE_DIR")
	if home, err := os.UserHomeDir(); err == nil && (dir == "~" || strings.HasPrefix(dir, "~/")) {
		dir = filepath.Join(home, dir[1:]) // as the daemon reads it
	}
	if dir == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			dir = filepath.Join(x, "pisyncd")
		} else if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".local", "state", "pisyncd")
			if runtime.GOOS == "darwin" {
				dir = filepath.Join(home, "Library", "Application Support", "pisyncd")
			}
		}
	}
	return filepath.Join(dir, "client-context.json")
}

// turns follows every session's turns from its events.
type turns struct {
	self   string
	cost   map[string]float64 // session → cost of the turn so far
	chunks map[string][]byte  // subject → the split line being joined
}

func newTurns(self string) *turns {
	return &turns{self: self, cost: map[string]float64{}, chunks: map[string][]byte{}}
}

// learnSelf takes this machine's node id from a PI_LOCAL subject.
func (t *turns) learnSelf(subject string) {
	if parts := strings.SplitN(subject, ".", 4); t.self == "" && len(parts) == 4 && parts[1] == "evt" {
		t.self = parts[2]
	}
}

// add takes one event and returns the line to print when it ends a turn.
func (t *turns) add(subject string, h nats.Header, data []byte) (string, bool) {
	// pi.evt.<node>.<sid> (PI_LOCAL) or pi.all.<node>.<sid> (PI_ALL).
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) != 4 {
		return "", false
	}
	t.learnSelf(subject)
	node, sid := parts[2], decodeSID(parts[3])
	if parts[1] == "all" && node == t.self {
		return "", false // this machine's own line, already read from PI_LOCAL
	}
	// An erased session (pisyncd erase) is gone: what is kept of it goes
	// too, so a session written again under its id does not add the
	// erased one's turn in progress to its first turn's cost. A reader
	// that keeps more of a session (or the KV views' s.<tok>.* values,
	// which the erase purges without a message to their subscribers)
	// drops it here as well (docs/SUBSCRIBING.md).
	if h.Get("Pi-Op") == "erase" {
		delete(t.cost, sid)
		delete(t.chunks, subject)
		return "", false
	}
	// A line over 256 KiB comes as chunks "i/n" on consecutive
	// sequences of its subject: join them before reading it.
	if c := h.Get("Pi-Chunk"); c != "" {
		t.chunks[subject] = append(t.chunks[subject], data...)
		var i, n int
		if _, err := fmt.Sscanf(c, "%d/%d", &i, &n); err != nil || i < n {
			return "", false
		}
		data = t.chunks[subject]
		delete(t.chunks, subject)
	}
	// Control events (Pi-Op: delete, restore, erase) are not lines.
	if h.Get("Pi-Op") != "" || h.Get("Pi-Type") != "message" {
		return "", false
	}
	var e struct {
		Message struct {
			Role       string `json:"role"`
			StopReason string `json:"stopReason"`
			Provider   string `json:"provider"`
			Model      string `json:"model"`
			Usage      struct {
				Cost struct {
					Total float64 `json:"total"`
				} `json:"cost"`
			} `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &e) != nil {
		return "", false
	}
	m := e.Message
	switch m.Role {
	case "user":
		t.cost[sid] = 0
	case "assistant":
		t.cost[sid] += m.Usage.Cost.Total
		if m.StopReason == "toolUse" {
			return "", false
		}
		cost := math.Round(t.cost[sid]*1e6) / 1e6
		t.cost[sid] = 0
		return fmt.Sprintf("turn ended: session %s entry %s on %s: %s, $%g (%s/%s)",
			sid, h.Get("Pi-Id"), node, m.StopReason, cost, m.Provider, m.Model), true
	}
	return "", false
}

// decodeSID reverses the subject encoding of session ids: a token that
// starts with "~" is base64url (unpadded) of an id that is not
// [A-Za-z0-9_-]+ (pi's own UUIDs never are).
func decodeSID(tok string) string {
	if b64, ok := strings.CutPrefix(tok, "~"); ok {
		if b, err := base64.RawURLEncoding.DecodeString(b64); err == nil {
			return string(b)
		}
	}
	return tok
}
