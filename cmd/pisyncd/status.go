package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/redact"
)

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
	// The daemon redacts too; a daemon of an older version did not.
	st.HubURLs, st.NATSURL = redact.URLs(st.HubURLs), redact.URL(st.NATSURL)
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
	if st.StreamError != "" {
		row("stream error", st.StreamError)
	}
	if s := st.Store; s != nil {
		state := s.State
		if s.State != embedded.StoreOK {
			state = fmt.Sprintf("%s since %s (publishing waits; recovers by itself once the disk takes writes): %s",
				s.State, s.Since.Format(time.RFC3339), s.Error)
		}
		row("event store", state)
		row("state dir disk free", freeNote(s.FreeBytes))
		if s.WriteFailures > 0 {
			row("event store write failures", fmt.Sprintf("%d, recovered in place %d (last %s, outage %s)",
				s.WriteFailures, s.Recoveries, s.LastRecovery.Format(time.RFC3339), time.Duration(s.LastOutageSeconds*float64(time.Second)).Round(time.Millisecond)))
		}
	}
	row("sessions dir disk free", freeNote(st.SessionsDirFreeBytes))
	if st.FilesRetrying > 0 {
		row("files waiting to publish (back-off)", st.FilesRetrying)
	}
	if st.Forwarder != nil {
		row("hub", strings.Join(st.HubURLs, ", "))
		row("hub reachable", st.Forwarder.Connected || st.Downloader.Connected)
		row("lines forwarded to the hub", st.Forwarder.Forwarded)
		row("lines copied from the hub", st.Downloader.Copied)
		r := st.Replicator
		row("remote sessions created here", r.FilesCreated)
		row("remote lines written here", r.LinesWritten)
		row("remote lines waiting", r.Waiting)
		if a := st.Admission; a != nil {
			row("remote events admitted", a.Admitted)
			row("remote events rejected", a.Rejected)
			for node, o := range a.ByOrigin {
				row("  rejected from "+node, fmt.Sprintf("%d %v", o.Rejected, o.ByReason))
			}
			for _, q := range a.Quarantined {
				row("  quarantined", fmt.Sprintf("session %s from %s: %s", q.Session, q.Node, q.Reason))
			}
		}
		row("remote lines not written (unsafe)", r.Rejected)
		row("remote lines not written (would break the file)", r.Refused)
		row("remote lines not written (untrusted node)", r.Untrusted)
		for sid, why := range r.Quarantined {
			row("  quarantined here", sid+": "+why)
		}
		for _, c := range r.CollisionsList {
			row("  collision", fmt.Sprintf("session %s entry %s: %s's line kept, %s's not written", c.Session, c.ID, c.Nodes[0], c.Nodes[1]))
		}
		row("moved to trash", r.Trashed)
		row("sessions brought back (restored elsewhere)", r.Restored)
		row("forked sessions", fmt.Sprintf("%d %v", r.ForkedSessions, st.ForkedSessions))
		row("entry id collisions (remote)", r.Collisions)
	}
	if st.Tailer.LastError != "" {
		row("last error", st.Tailer.LastError)
	}
	return tw.Flush()
}

// lowSpace is where status calls a disk full: less than the largest
// message the store writes at once.
const lowSpace = 1 << 20

// freeNote prints free space, and says when it is (nearly) gone.
func freeNote(n int64) string {
	if n >= 0 && n < lowSpace {
		return byteCount(n) + " (FULL)"
	}
	return byteCount(n)
}

// byteCount prints n bytes for people.
func byteCount(n int64) string {
	if n < 0 {
		return "unknown"
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
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

	return askDaemon(ctx, cfg, "/events?session="+url.QueryEscape(sid), func(body io.Reader) error {
		dec := json.NewDecoder(body)
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
	}, func(d *Daemon) error {
		return d.log.Scan(ctx, sid, 0, true, func(ev *eventlog.Event) error {
			return emit(newEventJSON(ev))
		})
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
