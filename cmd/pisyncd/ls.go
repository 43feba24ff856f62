package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/projection"
)

// lsCommand prints the session catalog, newest first: from the running
// daemon's memory, else read from the pi_proj bucket.
func lsCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the catalog as one JSON array")
	if err := parseArgs(fs, args, "pisyncd ls [--json]", 0); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	entries, err := fetchCatalog(ctx, cfg)
	if errors.Is(err, errNoStore) && !*asJSON {
		_, err = fmt.Fprintf(stdout, "no sessions: %v\n", err)
		return err
	}
	if err != nil && !errors.Is(err, errNoStore) {
		return err
	}
	if *asJSON {
		if entries == nil {
			entries = []projection.CatalogEntry{}
		}
		return json.NewEncoder(stdout).Encode(entries)
	}
	if err := printCatalog(stdout, entries); err != nil {
		return err
	}
	// Sessions held for a team key are in no catalog until the key is
	// here: someone missing a teammate's session learns why from the
	// list. Only a running daemon knows (its status); without one the
	// list stands alone.
	if st, err := fetchStatus(ctx, cfg); err == nil {
		return printHeld(stdout, st.Downloader)
	}
	return nil
}

// printHeld follows the table of `pisyncd ls` with the sessions from other
// machines held for a team key this machine lacks, if any.
func printHeld(w io.Writer, d *eventlog.DownloaderStats) error {
	if d == nil || d.Held == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "\n%d more from other machines held, not listed: sealed%s with %s, which this machine does not have (pisyncd key import; pisyncd status)\n", d.Held, cli.TerminalSafe(heldNodes(d, "by")), cli.TerminalSafe(heldKeys(d)))
	return err
}

func fetchCatalog(ctx context.Context, cfg *config.Config) ([]projection.CatalogEntry, error) {
	var entries []projection.CatalogEntry
	err := askDaemon(ctx, cfg, "/ls", func(body io.Reader) error {
		if err := json.NewDecoder(body).Decode(&entries); err != nil {
			return fmt.Errorf("ls: %w", err)
		}
		return nil
	}, func(d *Daemon) error {
		// No daemon: read what the last run left in the bucket.
		var err error
		entries, err = projection.OpenCatalog(ctx, d.log.JetStream())
		return err
	})
	return entries, err
}

// printCatalog is the table of `pisyncd ls`: one line a session, about 110
// columns for a session id and a short path. NODES is always how many
// machines wrote to the session (--json names them). What does not fit a
// column (deleted, unreadable, forked, entry-id collisions) follows the
// table, one line a note, with the session id.
func printCatalog(w io.Writer, entries []projection.CatalogEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATED\tSESSION\tENTRIES\tTOKENS\tCOST\tNODES\tNAME / CWD")
	var notes []string
	for _, e := range entries {
		// The name and the cwd are session text: a hostile file's
		// escape sequences must not drive the terminal.
		label := cli.TerminalSafe(e.Name)
		if label == "" {
			label = cli.TerminalSafe(e.Cwd)
		}
		n := catalogNotes(e)
		if len(n) > 0 {
			label += " (*)"
			notes = append(notes, n...)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t$%.2f\t%d\t%s\n", shortTime(e.Updated), cli.TerminalSafe(e.SessionID), e.Entries, shortCount(e.Tokens), e.Cost, len(e.Nodes), shortPath(label, 40))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\n(*)")
	}
	for _, n := range notes {
		if _, err := fmt.Fprintln(w, "  "+n); err != nil {
			return err
		}
	}
	return nil
}

// catalogNotes are a session's notes for the end of the table.
func catalogNotes(e projection.CatalogEntry) []string {
	var notes []string
	// A session id is the header's: a line of any text, only stored in
	// a subject token's encoding.
	sid := cli.TerminalSafe(e.SessionID)
	switch {
	case e.Deleted:
		notes = append(notes, fmt.Sprintf("%s: deleted (on %s)", sid, strings.Join(e.DeletedOn, ", ")))
	case len(e.DeletedOn) > 0:
		// Deleted where only a copy was (a machine that never wrote
		// it deletes it for itself): the row looked like a live
		// session's (a probe, 2026-12-07).
		var kept []string
		for _, n := range e.Nodes {
			if !slices.Contains(e.DeletedOn, n) {
				kept = append(kept, n)
			}
		}
		note := fmt.Sprintf("%s: deleted on %s", sid, strings.Join(e.DeletedOn, ", "))
		if len(kept) > 0 {
			note += ", not on " + strings.Join(kept, ", ")
		}
		notes = append(notes, note)
	}
	if e.Error != "" {
		notes = append(notes, fmt.Sprintf("%s: unreadable: %s", sid, cli.TerminalSafe(e.Error)))
	}
	if e.Forked {
		notes = append(notes, fmt.Sprintf("%s: forked from %s", sid, cli.TerminalSafe(e.ParentSession)))
	}
	for _, c := range e.Collisions {
		if c.Nodes[0] == c.Nodes[1] {
			notes = append(notes, fmt.Sprintf("%s: entry %s written twice by %s, with other bytes", sid, cli.TerminalSafe(c.ID), c.Nodes[0]))
			continue
		}
		notes = append(notes, fmt.Sprintf("%s: entry %s claimed by %s and %s", sid, cli.TerminalSafe(c.ID), c.Nodes[0], c.Nodes[1]))
	}
	return notes
}

// shortTime is an entry timestamp to the minute, in local time; one that
// is no time is printed as it is, made safe for a terminal (a session's
// timestamp is any string its writer chose: a probe's cleared the screen
// through pisyncd search).
func shortTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return cli.OrDash(cli.TerminalSafe(ts))
	}
	return t.Local().Format("2006-01-02 15:04")
}

// shortCount is a token count in k or M.
func shortCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

// shortPath keeps the end of a long name or path, where the project is.
func shortPath(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n+1:])
	}
	return s
}
