package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// contextCommand is `pisyncd context FILE|SESSION-ID [--leaf ID] [--rules
// SET] [--json]`: an argument naming an existing file is read as that file
// (pi's rules, no daemon: contextFileCommand); anything else is a session
// id, served from the running daemon's projection, or built from the
// streams when no daemon runs. --rules overrides the configured rule set
// (PISYNC_RULES; the daemon's own when it serves the query) for this query.
func contextCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, contextJSONUsage)
	leaf := fs.String("leaf", "", "build the context at this entry id instead of the leaf")
	rules := fs.String("rules", "", contextRulesUsage)
	if err := parseArgs(fs, reorder(args, contextValued...), contextUsage, 1); err != nil {
		return err
	}
	if _, err := contextRules(*rules); err != nil {
		return err
	}
	arg := fs.Arg(0)
	st, err := os.Stat(arg)
	switch {
	case err == nil && !st.IsDir():
		return contextFileCommand(args, stdout)
	case err == nil:
		return fmt.Errorf("context: %s is a folder; want a session file or a session id", arg)
	case looksLikePath(arg):
		// A session id never holds a '/': this was meant as a file.
		if errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("context: %s: no such file", arg)
		}
		return fmt.Errorf("context: %w", err)
	}
	// A file's context checks it itself (contextFileCommand).
	if err := cli.CheckLeafFlag(fs, contextUsage); err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if *asJSON {
		bw := cli.HoldBack(stdout) // copied as it comes
		if err := writeSessionContext(ctx, cfg, arg, *leaf, *rules, bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	pr, pw := io.Pipe()
	var sum *cli.Summary
	var rerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		sum, rerr = cli.ReadSummary(pr)
		if rerr == nil {
			io.Copy(io.Discard, pr) // the '\n' after the context
		}
		pr.CloseWithError(rerr) // a reader that stops early stops the writer
	}()
	err = writeSessionContext(ctx, cfg, arg, *leaf, *rules, pw)
	pw.CloseWithError(err)
	<-done
	switch {
	case rerr != nil && (err == nil || errors.Is(err, io.ErrClosedPipe)):
		return rerr // the answer was not a context; the writer only saw the pipe close
	case err != nil:
		return err
	}
	if *rules != "" && sum.Rules == "" {
		return errors.New("context: the running daemon does not know --rules (it predates it): restart it")
	}
	return sum.Print(stdout)
}

const contextUsage = "pisyncd context FILE|SESSION-ID [--leaf ID] [--rules auto|seed|pi-1.6] [--json]"

// writeSessionContext writes the session's context as
// projection.ContextJSON writes it, under the rule set rules ("": the
// configured one), and a '\n' to out, as the daemon (or, when none runs,
// the store) produces it, without holding it.
func writeSessionContext(ctx context.Context, cfg *config.Config, sid, leaf, rules string, out io.Writer) error {
	q := url.Values{"session": {sid}}
	if leaf != "" {
		q.Set("leaf", leaf)
	}
	mode := cfg.RuleSet()
	if rules != "" {
		q.Set("rules", rules)
		mode, _ = session.ParseRuleSet(rules) // checked by contextCommand
	}
	err := askDaemon(ctx, cfg, "/context?"+q.Encode(), func(body io.Reader) error {
		// Without ReadFrom: a bufio.Writer's ReadFrom hands an empty
		// buffer's copy to stdout's own, which writes every 32 KiB read
		// straight through (6,390 writes for a 219 MB context).
		_, err := io.Copy(writerOnly{out}, body)
		return err
	}, func(d *Daemon) error {
		if err := projection.WriteStoredContext(ctx, out, d.nc, cfg.NodeID, sid, leaf, len(cfg.HubURLs) > 0, mode); err != nil {
			return err
		}
		_, err := io.WriteString(out, "\n")
		return err
	})
	var de *daemonError
	switch {
	case err == nil:
		return nil
	case notFound(err) || errors.Is(err, projection.ErrUnknownSession):
		return noSession("context", sid)
	case errors.Is(err, errNoStore):
		return fmt.Errorf("context: no session %q: %w", sid, err)
	case errors.As(err, &de):
		// The daemon's message already names what failed.
		return fmt.Errorf("context: %s", strings.TrimPrefix(strings.TrimPrefix(de.msg, "projection: "), "context: "))
	}
	return fmt.Errorf("context: %w", err)
}

// writerOnly hides everything of a writer but Write (io.Copy's
// ReaderFrom shortcut).
type writerOnly struct{ io.Writer }

// looksLikePath reports whether a context argument names a file: pi's
// session ids are [A-Za-z0-9._-], never a path.
func looksLikePath(arg string) bool {
	return strings.ContainsRune(arg, '/') || strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".jsonl")
}
