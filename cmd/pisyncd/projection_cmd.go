package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	raw, err := sessionContext(ctx, cfg, arg, *leaf, *rules)
	if err != nil {
		return err
	}
	var cj contextJSON
	if err := json.Unmarshal(raw, &cj); err != nil {
		return fmt.Errorf("context: %w", err)
	}
	if *rules != "" && cj.Rules == "" {
		return errors.New("context: the running daemon does not know --rules (it predates it): restart it")
	}
	if *asJSON {
		_, err = fmt.Fprintf(stdout, "%s\n", raw)
		return err
	}
	return printContext(stdout, cj.context(), rulesNote(cj.Rules, cj.RulesMode))
}

const contextUsage = "pisyncd context FILE|SESSION-ID [--leaf ID] [--rules auto|seed|pi-1.6] [--json]"

// contextJSON is a context as the control socket sends it
// (projection.ContextJSON).
type contextJSON struct {
	Rules           string            `json:"rules"`
	RulesMode       string            `json:"rulesMode"`
	LeafID          json.RawMessage   `json:"leafId"`
	LeafUndefined   bool              `json:"leafIdUndefined"`
	ContextEntryIDs []json.RawMessage `json:"contextEntryIds"`
	Messages        []json.RawMessage `json:"messages"`
	ThinkingLevel   json.RawMessage   `json:"thinkingLevel"`
	Model           json.RawMessage   `json:"model"`
}

// sessionContext returns the session's context as projection.ContextJSON
// writes it, under the rule set rules ("": the configured one).
func sessionContext(ctx context.Context, cfg *config.Config, sid, leaf, rules string) ([]byte, error) {
	q := url.Values{"session": {sid}}
	if leaf != "" {
		q.Set("leaf", leaf)
	}
	mode := cfg.RuleSet()
	if rules != "" {
		q.Set("rules", rules)
		mode, _ = session.ParseRuleSet(rules) // checked by contextCommand
	}
	var out []byte
	err := askDaemon(ctx, cfg, "/context?"+q.Encode(), func(body io.Reader) error {
		raw, err := io.ReadAll(body)
		out = bytes.TrimSpace(raw)
		return err
	}, func(d *Daemon) error {
		c, err := projection.LoadContext(ctx, d.nc, cfg.NodeID, sid, leaf, len(cfg.HubURLs) > 0, mode)
		if err != nil {
			return err
		}
		out, err = projection.ContextJSON(c, mode)
		return err
	})
	var de *daemonError
	switch {
	case err == nil:
		return out, nil
	case notFound(err) || errors.Is(err, projection.ErrUnknownSession):
		return nil, noSession("context", sid)
	case errors.Is(err, errNoStore):
		return nil, fmt.Errorf("context: no session %q: %w", sid, err)
	case errors.As(err, &de):
		// The daemon's message already names what failed.
		return nil, fmt.Errorf("context: %s", strings.TrimPrefix(strings.TrimPrefix(de.msg, "projection: "), "context: "))
	}
	return nil, fmt.Errorf("context: %w", err)
}

// looksLikePath reports whether a context argument names a file: pi's
// session ids are [A-Za-z0-9._-], never a path.
func looksLikePath(arg string) bool {
	return strings.ContainsRune(arg, '/') || strings.ContainsRune(arg, os.PathSeparator) || strings.HasSuffix(arg, ".jsonl")
}

// context turns the wire form back into a session.Context for the human
// form (which shows string ids only; --json prints the wire form as is).
// The rule set travels beside it (rulesNote).
func (cj *contextJSON) context() *session.Context {
	c := &session.Context{Messages: cj.Messages, ThinkingLevel: cj.ThinkingLevel, Model: cj.Model}
	c.LeafID = parseID(cj.LeafID)
	for _, raw := range cj.ContextEntryIDs {
		c.EntryIDs = append(c.EntryIDs, parseID(raw))
	}
	return c
}

// parseID reads a string id; anything else becomes the zero ID, which
// prints as null.
func parseID(raw json.RawMessage) session.ID {
	var s *string
	if json.Unmarshal(raw, &s) != nil || s == nil {
		return session.ID{}
	}
	return session.StringID(*s)
}
