package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/internal/redact"
)

func statusCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseArgs(fs, args, "pisyncd status [--json]", 0); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := fetchStatus(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return printStatus(stdout, &st)
}

// fetchStatus asks the running daemon for its status.
func fetchStatus(ctx context.Context, cfg *config.Config) (Status, error) {
	resp, err := getControl(ctx, cfg, "/status")
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	// The daemon redacts too; a daemon of an older version did not.
	st.HubURLs, st.NATSURL = redact.URLs(st.HubURLs), redact.URL(st.NATSURL)
	return st, nil
}

// printStatus writes the text form of a status. Its values are printed
// terminal-safe: some are anyone's text (a colliding entry id is another
// machine's choice, a file name or an error quotes the sessions dir).
func printStatus(stdout io.Writer, st *Status) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	row := func(k string, v any) {
		fmt.Fprintf(tw, "%s\t%s\n", cli.TerminalSafe(k), cli.TerminalSafe(fmt.Sprint(v)))
	}
	if st.Build.Version == "" {
		row("version", "unknown (a daemon older than `pisyncd version`)")
	} else {
		row("version", st.Build)
	}
	row("node", st.Node)
	row("pid", st.PID)
	// The counts below start at 0 with each start (the stream's are its
	// own): "entries published 0" beside a stream of thousands read as
	// nothing published.
	row("up since", st.Started.Format(time.RFC3339)+" (the counts below are since then; the stream's are all time)")
	if st.Tailer.SessionsDirAway {
		row("sessions dir", st.SessionsDir+" (away: gone, or none of its session files there; nothing is taken for deleted until it is back)")
	} else {
		row("sessions dir", st.SessionsDir)
	}
	if st.Tailer.RescanError != "" {
		row("sessions dir rescans fail", st.Tailer.RescanError)
	}
	row("state dir", st.StateDir)
	if st.WaitingForHub {
		row("session files", "not read yet: this state dir has published nothing and the sessions dir holds files from before it, which may be copies of other machines' sessions; they are read once everything the hub holds is copied here (the hub link below; sessions held for a team key wait for pisyncd key import)")
	}
	if st.NATSURL != "" {
		row("nats listener", st.NATSURL)
	}
	if st.Listener != nil {
		row("local readers' reads", fmt.Sprintf("%d answered, %d dropped (more than 256 waiting)", st.Listener.Answered, st.Listener.Dropped))
	}
	row("files tracked", st.Tailer.FilesTracked)
	if st.Tailer.DeletionsWaiting > 0 {
		row("deletions waiting", fmt.Sprintf("%d (session files gone; published once a rescan finds the sessions dir still there)", st.Tailer.DeletionsWaiting))
	}
	row("files ignored", ignoredText(st.Tailer.FilesIgnored, st.Tailer.FilesIgnoredBy))
	if st.Tailer.DuplicatePaths > 0 || st.Tailer.UnreadableFolders > 0 {
		row("paths of a file followed elsewhere", st.Tailer.DuplicatePaths)
		row("folders not readable", st.Tailer.UnreadableFolders)
	}
	for _, f := range st.Tailer.SlowFiles {
		row("file read for long", fmt.Sprintf("%s, for %gs, %d bytes read: the files of its worker wait for it (a huge file, or a network mount that does not answer)", cli.TerminalSafe(f.File), f.Seconds, f.BytesRead))
	}
	if st.Tailer.UnwatchedFolders > 0 {
		row("folders not watched", fmt.Sprintf("%d (their lines are found by the rescans, every PISYNC_RESCAN_INTERVAL; the log says which limit to raise)", st.Tailer.UnwatchedFolders))
	}
	row("memory budget", fmt.Sprintf("%d bytes (PISYNC_MEMORY_BUDGET, the bound on peak resident memory), Go memory limit %d", st.MemoryBudget, st.GoMemoryLimit))
	row("Go heap", fmt.Sprintf("%d bytes live at the last collection, %d held for objects", st.Heap.LiveBytes, st.Heap.InUseBytes))
	row("lines held in memory", fmt.Sprintf("%d bytes now, %d at most, of %d (a quarter of PISYNC_MEMORY_BUDGET less its 256 MiB reserve)", st.Tailer.MemoryHeld, st.Tailer.MemoryPeak, st.Tailer.MemoryBudget))
	row("sessions", st.Tailer.Sessions)
	row("entries published", st.Tailer.LinesPublished)
	row("malformed lines", st.Tailer.Malformed)
	row("entry id collisions", st.Tailer.Collisions)
	row("publish errors", st.Tailer.PublishErrors)
	row("sessions erased here (pisyncd erase)", st.Erased)
	if s := st.Search; s != nil {
		// What search's "the index has yet to add N lines" points to.
		lag := "up to date"
		if s.Lag > 0 {
			lag = fmt.Sprintf("%s still to add (search misses hits among them until then)", cli.Plural(int(s.Lag), "message", "messages"))
		}
		row("search index", fmt.Sprintf("%d documents, %d bytes; %s", s.Docs, s.IndexBytes, lag))
	}
	row("stream", fmt.Sprintf("%s: %d messages, %d bytes, last seq %d, %d subjects", eventlog.LocalStream, st.Stream.Messages, st.Stream.Bytes, st.Stream.LastSeq, st.Stream.Subjects))
	if st.StreamError != "" {
		row("stream error", st.StreamError)
	}
	if st.StoreCipher != embedded.StoreCipherOff {
		row("event store at rest", "encrypted, cipher "+st.StoreCipher)
	} else {
		row("event store at rest", "in clear (PISYNC_STORE_CIPHER=off)")
	}
	if s := st.Store; s != nil {
		state := s.State
		switch s.State {
		case embedded.StoreOK:
			if s.LimitBytes > 0 {
				state = fmt.Sprintf("ok, holds %d of PISYNC_MAX_STORE %d bytes", s.UsedBytes, s.LimitBytes)
			}
		case embedded.StoreAtLimit:
			state = atLimitNote(*s)
		default:
			state = fmt.Sprintf("%s since %s (publishing waits; recovers by itself once the disk takes writes): %s",
				s.State, s.Since.Format(time.RFC3339), s.Error)
		}
		row("event store", state)
		row("state dir disk free", freeNote(s.FreeBytes))
		switch {
		case s.WriteFailures > 0 && s.Recoveries == 0:
			row("event store write failures", fmt.Sprintf("%d, not recovered yet", s.WriteFailures))
		case s.WriteFailures > 0:
			row("event store write failures", fmt.Sprintf("%d, recovered %d (last %s, outage %s)",
				s.WriteFailures, s.Recoveries, s.LastRecovery.Format(time.RFC3339), time.Duration(s.LastOutageSeconds*float64(time.Second)).Round(time.Millisecond)))
		}
	}
	row("sessions dir disk free", freeNote(st.SessionsDirFreeBytes))
	if st.FilesRetrying > 0 {
		row("files waiting to publish (back-off)", st.FilesRetrying)
	}
	if st.Forwarder != nil {
		row("hub", strings.Join(st.HubURLs, ", "))
		if st.HubLinked != nil {
			link := "up"
			if st.HubPeer != "" {
				link = "up, to " + st.HubPeer
			}
			if !*st.HubLinked {
				link = "down (the embedded server dials the hub again every 1-2 s)"
			}
			row("hub link", link)
			if st.HubLinkCause != "" {
				row("hub link cause", st.HubLinkCause)
			}
		}
		// The same two facts as --json's forwarder.hubReachable and
		// downloader.hubReachable: either direction may be down alone.
		fwd := yesNo(st.Forwarder.Connected)
		why := "they go when the hub is reachable; keep this machine online until then"
		if e := st.Encryption; e != nil && e.ForwardWaiting != "" {
			// Held back for the team key: the hub may well be reachable.
			fwd, why = "waits for the team key", "they wait for the team key: "+e.ForwardWaiting
		}
		row("hub reachable", fmt.Sprintf("forwarder %s, downloader %s", fwd, yesNo(st.Downloader.Connected)))
		row("lines forwarded to the hub", st.Forwarder.Forwarded)
		storeFailing := st.Store != nil && st.Store.State != embedded.StoreOK
		switch n := st.Forwarder.Unsent; {
		case n < 0:
			row("not yet on the hub", "unknown: this machine's store did not answer (the stream error above)")
		case n > 0:
			row("not yet on the hub", fmt.Sprintf("%d messages written here (%s)", n, why))
		case storeFailing || st.FilesRetrying > 0:
			// Lines pi wrote wait for this machine's own store: they are
			// not on the hub either (it said "everything written here is
			// on the hub" while a full disk held them back: a files
			// probe, 2026-12-07).
			row("not yet on the hub", "0 of what this machine's store holds; lines pi wrote wait for the store first (above)")
		case st.StreamError == "":
			row("not yet on the hub", "0 (everything written here is on the hub)")
		}
		if n := st.Forwarder.NotOwn; n > 0 {
			row("lines on this machine's hub subjects it did not write", fmt.Sprintf("%d (someone else writes there, the hub's operator or a hub restored from a backup; the sessions' lines were forwarded again after them: the daemon's log names the subjects)", n))
		}
		if n := st.Forwarder.Waiting; n > 0 {
			row("sessions waiting for the hub to take a batch", fmt.Sprintf("%d (an image each; the hub refuses atomic batches: docs/SECURITY.md)", n))
		}
		row("lines copied from the hub", st.Downloader.Copied)
		if n := st.Downloader.Held; n > 0 {
			row("sessions held for a team key", fmt.Sprintf("%d%s (sealed with %s, which this machine does not have: held here and copied once it has it, pisyncd key import; everything else is copied. Where key import refuses that key as another team's, its machine began a team of its own with key init: it imports this team's key, and what it sealed before stays unreadable here)", n, heldNodes(st.Downloader, "from"), heldKeys(st.Downloader)))
		}
		if e := st.Encryption; e != nil {
			row("end-to-end encryption", encryptionNote(e))
			if e.KeyError != "" {
				row("team key error", e.KeyError)
			}
			if e.ForwardWaiting != "" {
				row("forwarding waits", e.ForwardWaiting)
			}
			if e.TeamChanged != "" {
				row("team key changed", e.TeamChanged)
			}
			if e.CopyWaiting != "" {
				row("copying waits", e.CopyWaiting)
			}
		}
		r := st.Replicator
		row("remote sessions created here", r.FilesCreated)
		row("remote lines written here", r.LinesWritten)
		switch {
		case r.WaitingForHeader > 0:
			// Lines that wait for good said nothing of why before.
			row("remote lines waiting", fmt.Sprintf("%d (%s whose header has not come here)", r.Waiting, cli.Plural(int(r.WaitingForHeader), "session", "sessions")))
		case r.WaitingForPartial > 0:
			// Lines that wait up to a minute and more: why, and for
			// which session (it said "3" alone: a files probe,
			// 2026-12-07).
			row("remote lines waiting", fmt.Sprintf("%d (%s whose file here ends in a partial line, %s among them: they follow once pi ends it, or once it has been left as it is for 60 × PISYNC_IDLE_AFTER, then ended as pi ends it)",
				r.Waiting, cli.Plural(int(r.WaitingForPartial), "session", "sessions"), r.PartialExample))
		default:
			row("remote lines waiting", r.Waiting)
		}
		if r.Failing > 0 {
			// Why lines wait: "waiting 4" beside a disk nearly full said
			// nothing of the writes that fail.
			row("remote sessions whose writes fail", fmt.Sprintf("%d, retried (last error: %s)", r.Failing, r.FailingError))
		}
		if a := st.Admission; a != nil {
			// Every line written here comes back from the hub and is
			// admitted too: counted apart, so that "remote" is other
			// machines' alone.
			row("remote events admitted", fmt.Sprintf("%d (and %d of this machine's own, back from the hub)", a.Admitted-a.Own, a.Own))
			if a.NotWrittenHere > 0 {
				row("sessions of this node id written elsewhere", fmt.Sprintf("%d, %s among them: another machine runs or ran as %s, and its sessions are not written here: give one of the two an id of its own (the log says how)",
					a.NotWrittenHere, a.NotWrittenExample, st.Node))
			}
			row("remote events rejected", a.Rejected)
			for node, o := range a.ByOrigin {
				// As the ignored files: %v printed Go's "3 map[unsealed:3]".
				row("  rejected from "+node, ignoredText(o.Rejected, o.ByReason))
			}
			for _, q := range a.Quarantined {
				row("  quarantined", fmt.Sprintf("session %s from %s: %s", q.Session, q.Node, q.Reason))
			}
		}
		row("remote lines not written (unsafe)", r.Rejected)
		row("remote lines not written (would break the file)", r.Refused)
		row("remote lines not written (untrusted node)", r.Untrusted)
		if r.ErasedLines > 0 {
			row("remote lines not written (session erased here)", r.ErasedLines)
		}
		for sid, why := range r.Quarantined {
			// With the mend: the row stays until the restart that
			// writes the lines (only the log said so).
			row("  quarantined here", sid+": "+why+" (mend it, then restart pisyncd: the session's lines are written then)")
		}
		for _, c := range r.CollisionsList {
			row("  collision", fmt.Sprintf("session %s entry %s: %s's line kept, %s's not written", c.Session, c.ID, c.Nodes[0], c.Nodes[1]))
		}
		row("moved to trash", r.Trashed)
		if r.KeptWritten > 0 || r.Rejoined > 0 {
			// In --json only before: the sessions another machine
			// deleted that stay here because a pi here wrote them.
			row("deleted elsewhere, kept (written here)", r.KeptWritten)
			row("deleted elsewhere, put back (written after the trash)", r.Rejoined)
		}
		row("sessions brought back (restored elsewhere)", r.Restored)
		row("sessions erased for other machines", r.Erased)
		row("forked sessions", fmt.Sprintf("%d %v", r.ForkedSessions, st.ForkedSessions))
		row("entry id collisions (remote)", r.Collisions)
	}
	if st.Tailer.LastError != "" {
		row("last error", st.Tailer.LastError)
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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
	Stream   string          `json:"stream"` // PI_LOCAL (this machine's lines) or PI_ALL (others')
	Subject  string          `json:"subject"`
	Seq      uint64          `json:"seq"`
	Node     string          `json:"node"`
	Session  string          `json:"session"`
	EntryID  string          `json:"entryId,omitempty"` // none for a control event, as in tail --json
	ParentID string          `json:"parentId,omitempty"`
	Type     string          `json:"type"`
	Op       string          `json:"op,omitempty"` // a control event: delete, restore, erase (as in tail --json)
	Sha256   string          `json:"sha256"`
	File     string          `json:"file,omitempty"`
	Bytes    int             `json:"bytes"`
	Entry    json.RawMessage `json:"entry,omitempty"`
	RawLine  string          `json:"rawLine,omitempty"` // only if the payload is not JSON in UTF-8
}

func newEventJSON(ev *eventlog.Event) eventJSON {
	e := eventJSON{
		Stream: ev.Stream, Subject: ev.Subject, Seq: ev.Seq, Node: ev.Node, Session: ev.SID, EntryID: ev.ID,
		ParentID: ev.ParentID, Type: ev.Type, Op: ev.Op, Sha256: fmt.Sprintf("%x", ev.Sha), File: ev.File, Bytes: ev.Size,
	}
	if ev.Raw == nil {
		return e // read without the lines (events without --json prints none)
	}
	// JSON that is not UTF-8 (a byte pi never writes, from a damaged or
	// hostile file) is not copied as it is: the output would not be JSON
	// to a strict reader. As rawLine, each such byte is U+FFFD; sha256
	// still names the line's own bytes.
	if json.Valid(ev.Raw) && utf8.Valid(ev.Raw) {
		e.Entry = ev.Raw
	} else {
		e.RawLine = string(ev.Raw)
	}
	return e
}

func eventsCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "one JSON object a line")
	if err := parseArgs(fs, reorder(args), "pisyncd events SESSION-ID [--json]", 1); err != nil {
		return err
	}
	sid := fs.Arg(0)
	if err := eventlog.CheckSID(sid); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	show := eventPrinter(out, *asJSON)
	n := 0
	emit := func(e eventJSON) error {
		n++
		return show(e)
	}
	// Without --json only the headers are read: a line's entry is not
	// printed, and reading every line of a big session cost most of the
	// time (a 300,000-line session took 19 s for 13 MB of output, the
	// daemon sending 450 MB of entries).
	q := "/events?session=" + url.QueryEscape(sid)
	if !*asJSON {
		q += "&entries=no"
	}
	err = askDaemon(ctx, cfg, q, func(body io.Reader) error {
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
		return d.scanEvents(ctx, sid, *asJSON, func(ev *eventlog.Event) error {
			return emit(newEventJSON(ev))
		})
	})
	if errors.Is(err, errNoStore) {
		return fmt.Errorf("events: no session %q: %w", sid, err)
	}
	if err == nil && n == 0 && ctx.Err() == nil {
		return noSession("events", sid)
	}
	if err == nil {
		// The last events are written here: a full disk or a closed pipe
		// under them is a failure, not a short listing with exit 0.
		if err = out.Flush(); err != nil {
			err = fmt.Errorf("events: write: %w", err)
		}
	}
	return err
}

// scanEvents reads every stored event of session sid, with its line when
// withData: this machine's lines (PI_LOCAL), then the other machines' it
// copied (PI_ALL, in the order it stored them). Before, only this
// machine's: a session begun elsewhere, which ls lists and context reads,
// was "no session" to events.
func (d *Daemon) scanEvents(ctx context.Context, sid string, withData bool, fn func(*eventlog.Event) error) error {
	if err := d.log.Scan(ctx, sid, 0, withData, fn); err != nil {
		return err
	}
	return eventlog.ScanAllSession(ctx, d.log.JetStream(), sid, withData, func(ev *eventlog.Event) error {
		if ev.Node == d.cfg.NodeID {
			return nil // this machine's own, read above (or a copy that keeps the downloader's place)
		}
		return fn(ev)
	})
}

// noSession is the answer to a session id this machine does not hold.
func noSession(cmd, sid string) error {
	return fmt.Errorf("%s: no session %q on this machine (pisyncd ls lists them)", cmd, sid)
}

func eventPrinter(w io.Writer, asJSON bool) func(eventJSON) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return func(e eventJSON) error { return enc.Encode(e) }
	}
	return func(e eventJSON) error {
		parent, id := e.ParentID, e.EntryID
		if parent == "" {
			parent = "-"
		}
		if id == "" {
			id = "-" // a control event: its type says which
		}
		from := ""
		if e.Stream == eventlog.AllStream {
			from = "\tfrom " + cli.TerminalSafe(e.Node) // a line another machine wrote
		}
		_, err := fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d bytes%s\n", e.Seq, cli.TerminalSafe(e.Type), cli.TerminalSafe(id), cli.TerminalSafe(parent), e.Bytes, from)
		return err
	}
}

func encryptionNote(e *encryptionStatus) string {
	key := "no team key here"
	if e.CurrentKey != "" {
		key = fmt.Sprintf("team %s, key %s (%d key(s))", e.Team, e.CurrentKey, e.Keys)
	}
	if e.KeyError != "" {
		if e.CurrentKey == "" {
			key = "the team key file cannot be read (" + e.KeyError + ")"
		} else {
			key += "; the team key file cannot be read again (" + e.KeyError + "): the key read before is used"
		}
	}
	switch {
	case e.Mode == "off":
		return "off (" + key + "; sealed lines from others are still opened)"
	case e.Mode == "auto" && e.CurrentKey == "" && e.KeyError != "" && e.SealedFor != "":
		return "auto: " + key + ": nothing is forwarded to the hub until it is back"
	case e.Mode == "auto" && e.CurrentKey == "" && e.KeyError != "":
		return "auto: " + key + ": nothing is forwarded to the hub until it can be (fix it, or move it away to send in clear)"
	case e.Mode == "auto" && e.CurrentKey == "" && e.HubSealed != "":
		return "auto: " + key + ", and the team encrypts (" + e.HubSealed + "): nothing is forwarded to the hub until the team key is imported (pisyncd key import; PISYNC_ENCRYPT=off to send in clear on purpose)"
	case e.Mode == "auto" && e.CurrentKey == "":
		return "auto: off, " + key + " (lines go to the hub in clear)"
	case e.Mode == "auto":
		return "auto: on, " + key
	}
	return "on, " + key
}

// ignoredText is a count (of ignored files, of rejected events) and, when
// there are any, how many for each reason, in a stable order: "3
// (not-a-regular-file 2, unreadable 1)".
func ignoredText[R ~string](n int64, by map[R]int64) string {
	if len(by) == 0 {
		return strconv.FormatInt(n, 10)
	}
	reasons := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, by[r])
	}
	return fmt.Sprintf("%d (%s)", n, strings.Join(parts, ", "))
}

// heldKeys names the team keys the downloader's held sessions wait for.
func heldKeys(d *eventlog.DownloaderStats) string {
	if len(d.HeldFor) == 0 {
		return "a team key"
	}
	return "team key " + fewOf(d.HeldFor)
}

// fewOf joins the first three of names, and says how many more there
// are: a key message a session, a thousand sessions held made a row of
// 25 KB (a verifying probe, 2026-12-07).
func fewOf(names []string) string {
	const shown = 3
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// heldNodes names the nodes whose sessions are held, after word: " from
// eve, bob" ("" for none).
func heldNodes(d *eventlog.DownloaderStats, word string) string {
	if len(d.HeldFrom) == 0 {
		return ""
	}
	return " " + word + " " + fewOf(d.HeldFrom)
}

// atLimitNote says that the store holds PISYNC_MAX_STORE, and what to do:
// nothing more is stored until it has room, and it never makes room by
// itself (no stream of a workstation drops what it holds).
func atLimitNote(s embedded.StoreStats) string {
	return fmt.Sprintf("at its limit: it holds %d of PISYNC_MAX_STORE %d bytes, and nothing more is published or copied until it has room; nothing is lost meanwhile (the files keep the lines, and they are published once there is room): %s",
		s.UsedBytes, s.LimitBytes, atLimitFix)
}

// atLimitFix is the way out of a store at PISYNC_MAX_STORE, which status,
// /healthz and the log's hint name alike.
const atLimitFix = "set a larger PISYNC_MAX_STORE and restart, or erase sessions no one needs (pisyncd erase)"
