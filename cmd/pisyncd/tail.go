package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// tailTypes are the types --type selects that pisyncd knows: pi's entry
// types and its own control events. pi adds types of its own accord, so
// another is followed anyway, with a note: a misspelt one would otherwise
// wait in silence.
var tailTypes = append(slices.Clone(session.EntryTypes), "tombstone", eventlog.OpRestore, eventlog.EraseType)

const tailUsage = "pisyncd tail [--session ID] [--type T] [--json] [--from-start]"

// tailCommand follows new entries as the daemon's projection applies
// them, one line each, until interrupted. It needs the running daemon.
func tailCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	sid := fs.String("session", "", "only this session")
	typ := fs.String("type", "", "only entries of this type (message, compaction, tombstone, ...)")
	asJSON := fs.Bool("json", false, "one JSON object a line")
	fromStart := fs.Bool("from-start", false, "first everything already stored")
	if err := parseArgs(fs, args, tailUsage, 0); err != nil {
		return err
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "session" })
	if set && *sid == "" {
		// Before, an empty id followed every session, for ever.
		return &usageError{Msg: "tail: the session id is empty (pisyncd ls lists the sessions; without --session, tail follows them all)", Usage: tailUsage}
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	q := url.Values{"session": {*sid}, "type": {*typ}, "from": {"now"}}
	if *fromStart {
		q.Set("from", "start")
	}
	resp, err := getControl(ctx, cfg, "/tail?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.Header.Get(projection.HdrTailSession) == "unknown" {
		fmt.Fprintf(stderr, "pisyncd tail: no session %s here yet; waiting for its first entry (pisyncd ls lists the sessions; an id is given whole)\n", *sid)
	}
	if *typ != "" && !slices.Contains(tailTypes, *typ) {
		fmt.Fprintf(stderr, "pisyncd tail: type %q is none pisyncd knows (%s); waiting for entries of that type all the same\n", *typ, strings.Join(tailTypes, ", "))
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	dec := json.NewDecoder(resp.Body)
	for {
		var e struct {
			projection.TailEntry
			Error string `json:"error"`
		}
		if err := dec.Decode(&e); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil // interrupted, or the daemon stopped
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				// The answer cut off: the daemon ended without a word.
				return fmt.Errorf("tail: the daemon was killed or crashed (%w): `pisyncd status` says whether it runs; start it again (pisyncd run, or its service), its log says why it ended, and tail again", err)
			}
			return fmt.Errorf("tail: %w", err)
		}
		if e.Error == projection.ErrStopped.Error() {
			// The daemon stopped, as when its stream just ends.
			fmt.Fprintln(stderr, "pisyncd tail: the daemon stopped; start it again (pisyncd run, or its service) and tail again")
			return nil
		}
		if e.Error != "" {
			return fmt.Errorf("tail: %s", e.Error)
		}
		if *asJSON {
			b, _ := json.Marshal(e.TailEntry)
			out.Write(append(b, '\n'))
		} else {
			printTailEntry(out, &e.TailEntry)
		}
		// Each entry shows as it arrives.
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

func printTailEntry(w io.Writer, e *projection.TailEntry) {
	typ, id := e.Type, e.ID
	if e.Op != "" {
		// Named by its type, as events and --type name it (tombstone,
		// restore, erase); the file it is about in the id's place.
		id = e.File
		if typ == "" {
			typ = e.Op
		}
	}
	text := ""
	if e.Type == "message" {
		var m struct {
			Message struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		json.Unmarshal(e.Entry, &m)
		text = m.Message.Role + ": " + cli.ContentText(m.Message.Content)
	}
	// Every field is the line's own or its file's name, the session id
	// too (its header's: a subject token holds any text, encoded):
	// anyone's text.
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cli.TerminalSafe(e.Session), cli.OrDash(cli.TerminalSafe(typ)), cli.OrDash(cli.TerminalSafe(id)), cli.OrDash(cli.TerminalSafe(e.ParentID)), cli.Preview(text, 100))
}
