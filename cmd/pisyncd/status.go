package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
)

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

func statusCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("%w: pisyncd status [--json]", errUsage)
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := getControl(ctx, cfg, "/status")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("node", st.Node)
	row("pid", st.PID)
	row("up since", st.Started.Format(time.RFC3339))
	row("sessions dir", st.SessionsDir)
	row("state dir", st.StateDir)
	if st.NATSURL != "" {
		row("nats listener", st.NATSURL)
	}
	row("files tracked", st.Tailer.FilesTracked)
	row("files ignored (not pi sessions)", st.Tailer.FilesIgnored)
	row("sessions", st.Tailer.Sessions)
	row("entries published", st.Tailer.LinesPublished)
	row("malformed lines", st.Tailer.Malformed)
	row("entry id collisions", st.Tailer.Collisions)
	row("publish errors", st.Tailer.PublishErrors)
	row("stream", fmt.Sprintf("%s: %d messages, %d bytes, last seq %d, %d subjects", eventlog.LocalStream, st.Stream.Messages, st.Stream.Bytes, st.Stream.LastSeq, st.Stream.Subjects))
	if st.Forwarder != nil {
		row("hub", strings.Join(st.HubURLs, ", "))
		row("hub reachable", st.Forwarder.Connected || st.Downloader.Connected)
		row("lines forwarded to the hub", st.Forwarder.Forwarded)
		row("lines copied from the hub", st.Downloader.Copied)
		r := st.Replicator
		row("remote sessions created here", r.FilesCreated)
		row("remote lines written here", r.LinesWritten)
		row("remote lines waiting", r.Waiting)
		row("rejected (unsafe paths)", r.Rejected)
		row("moved to trash", r.Trashed)
		row("forked sessions", fmt.Sprintf("%d %v", r.ForkedSessions, st.ForkedSessions))
		row("entry id collisions (remote)", r.Collisions)
	}
	if st.Tailer.LastError != "" {
		row("last error", st.Tailer.LastError)
	}
	return tw.Flush()
}

// eventJSON is one line of `pisyncd events --json`.
type eventJSON struct {
	Subject  string          `json:"subject"`
	Seq      uint64          `json:"seq"`
	Node     string          `json:"node"`
	Session  string          `json:"session"`
	EntryID  string          `json:"entryId"`
	ParentID string          `json:"parentId,omitempty"`
	Type     string          `json:"type"`
	Sha256   string          `json:"sha256"`
	File     string          `json:"file,omitempty"`
	Bytes    int             `json:"bytes"`
	Entry    json.RawMessage `json:"entry,omitempty"`
	RawLine  string          `json:"rawLine,omitempty"` // only if the payload is not JSON
}

func newEventJSON(ev *eventlog.Event) eventJSON {
	e := eventJSON{
		Subject: ev.Subject, Seq: ev.Seq, Node: ev.Node, Session: ev.SID, EntryID: ev.ID,
		ParentID: ev.ParentID, Type: ev.Type, Sha256: fmt.Sprintf("%x", ev.Sha), File: ev.File, Bytes: len(ev.Raw),
	}
	if json.Valid(ev.Raw) {
		e.Entry = ev.Raw
	} else {
		e.RawLine = string(ev.Raw)
	}
	return e
}

func eventsCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "one JSON object a line")
	if err := fs.Parse(reorder(args)); err != nil || fs.NArg() != 1 {
		return fmt.Errorf("%w: pisyncd events SESSION-ID [--json]", errUsage)
	}
	sid := fs.Arg(0)
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	emit := eventPrinter(out, *asJSON)

	resp, err := getControl(ctx, cfg, "/events?session="+url.QueryEscape(sid))
	if err == nil {
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var e struct {
				eventJSON
				Error string `json:"error"`
			}
			if err := dec.Decode(&e); errors.Is(err, io.EOF) {
				return nil
			} else if err != nil {
				return fmt.Errorf("events: %w", err)
			}
			if e.Error != "" {
				return fmt.Errorf("events: %s", e.Error)
			}
			if err := emit(e.eventJSON); err != nil {
				return err
			}
		}
	}
	if !errors.Is(err, errNotRunning) {
		return err
	}
	// No daemon: open the store ourselves (this takes the state dir lock).
	d, err := OpenStore(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.log.Scan(ctx, sid, 0, true, func(ev *eventlog.Event) error {
		return emit(newEventJSON(ev))
	})
}

func eventPrinter(w io.Writer, asJSON bool) func(eventJSON) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return func(e eventJSON) error { return enc.Encode(e) }
	}
	return func(e eventJSON) error {
		parent := e.ParentID
		if parent == "" {
			parent = "-"
		}
		_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d bytes\n", e.Seq, e.Type, e.EntryID, parent, e.Bytes)
		return err
	}
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
