package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/search"
)

const searchUsage = `pisyncd search QUERY... [--json] [--limit N] [--after N] [--session ID] [--node ID]

Searches every session known here (the running daemon's index): all words
must match; "quoted phrases" match in order; -word excludes; session:ID,
node:ID, type:TYPE and role:ROLE filter. Flags may come anywhere; every
other argument is part of the query: a flag takes two dashes (-word
excludes a word, -json too), and after -- every argument is the query.`

// searchBounds are the numeric flags' ranges, the index's own: a number
// outside one is a mistake on the command line, said before the daemon is
// asked.
var searchBounds = map[string][2]int{"limit": {1, search.MaxLimit}, "after": {0, search.MaxOffset}}

// searchCommand asks the running daemon's index.
func searchCommand(args []string, stdout io.Writer) error {
	params, asJSON, err := searchArgs(args)
	if err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), search.QueryTimeout+5*time.Second)
	defer cancel()
	resp, err := getControl(ctx, cfg, "/api/search?"+params.Encode())
	if err != nil {
		var de *daemonError
		if errors.As(err, &de) {
			var body struct{ Error string }
			if json.Unmarshal([]byte(de.msg), &body) == nil && body.Error != "" {
				de.msg = body.Error
			}
			if de.status == http.StatusBadRequest {
				// The query as written: a usage error, exit 2 as the
				// README says (it was 1, as a failure).
				return &usageError{Msg: de.msg, Usage: searchUsage}
			}
		}
		return err
	}
	defer resp.Body.Close()
	var res search.Result
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res); err != nil {
		return fmt.Errorf("search: %w", err)
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	return printHits(stdout, res)
}

// printHits prints one hit in two lines: where, then the snippet with the
// matches in «». Session text is attacker-controlled: control characters
// (escape sequences a terminal would obey) are shown as spaces.
func printHits(w io.Writer, res search.Result) error {
	fmt.Fprintln(w, cli.Plural(int(res.Total), "hit", "hits"))
	if res.Approximate {
		fmt.Fprintf(w, "(phrases matched as their words in any order, excluded phrases not excluded: in order took longer than %v)\n", search.PhraseBudget)
	}
	if res.Unindexed > 0 {
		lines := fmt.Sprintf("%d lines", res.Unindexed)
		if res.Unindexed == 1 {
			lines = "1 line"
		}
		fmt.Fprintf(w, "(the index has yet to add %s: hits among them are missing; pisyncd status shows its progress)\n", lines)
	}
	for _, h := range res.Hits {
		kind := h.Type
		if h.Role != "" {
			kind += "/" + h.Role
		}
		fmt.Fprintf(w, "\n%s  %s  entry %s  %s  %s\n", cli.OrDash(shortTime(h.Timestamp)), cli.TerminalSafe(h.SessionID), cli.OrDash(cli.TerminalSafe(h.EntryID)), cli.TerminalSafe(h.Node), cli.TerminalSafe(kind))
		fmt.Fprintf(w, "    %s\n", cli.TerminalSafe(marked(h.Snippet, h.Highlights)))
	}
	if res.Next > 0 {
		fmt.Fprintf(w, "\nmore: --after %s\n", strconv.Itoa(res.Next))
	}
	return nil
}

// marked is the snippet with its highlights in «».
func marked(snippet string, highlights [][2]int) string {
	u := utf16.Encode([]rune(snippet))
	var b strings.Builder
	at := 0
	for _, h := range highlights {
		if h[0] < at || h[1] > len(u) || h[0] > h[1] {
			continue // not from our daemon: shown unmarked
		}
		b.WriteString(string(utf16.Decode(u[at:h[0]])))
		b.WriteString("«" + string(utf16.Decode(u[h[0]:h[1]])) + "»")
		at = h[1]
	}
	b.WriteString(string(utf16.Decode(u[at:])))
	return b.String()
}

// searchArgs picks the command's own flags out of args by name, spelled
// with two dashes (or -h); every other argument is the query. One dash is
// the query's: -word excludes a word, so -json or -node is an exclusion
// too, not a flag that takes the next word as its value. After --, every
// argument is the query. A two-dash word that is no flag ("--force") is
// the query's too.
func searchArgs(args []string) (params url.Values, asJSON bool, err error) {
	params = url.Values{}
	var words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if a == "-h" {
			return nil, false, &helpRequest{Usage: searchUsage}
		}
		flag, ok := strings.CutPrefix(a, "--")
		if !ok {
			words = append(words, a)
			continue
		}
		name, val, hasVal := strings.Cut(flag, "=")
		switch name {
		case "h", "help":
			return nil, false, &helpRequest{Usage: searchUsage}
		case "json":
			asJSON = true
			if hasVal {
				if asJSON, err = strconv.ParseBool(val); err != nil {
					return nil, false, &usageError{Msg: fmt.Sprintf("search: --json=%q: want true or false", val), Usage: searchUsage}
				}
			}
		case "limit", "after", "session", "node":
			if !hasVal {
				if i+1 >= len(args) {
					return nil, false, &usageError{Msg: "search: --" + name + " needs a value", Usage: searchUsage}
				}
				i++
				val = args[i]
			}
			if bound, ok := searchBounds[name]; ok {
				if n, err := strconv.Atoi(val); err != nil || n < bound[0] || n > bound[1] {
					return nil, false, &usageError{Msg: fmt.Sprintf("search: --%s %q: want a number from %d to %d", name, val, bound[0], bound[1]), Usage: searchUsage}
				}
			}
			params.Set(name, val)
		default:
			words = append(words, a) // "--force", say: words of the query, as before
		}
	}
	params.Set("q", strings.Join(words, " "))
	if len(words) == 0 && params.Get("session") == "" && params.Get("node") == "" {
		return nil, false, &usageError{Msg: "search: missing the query", Usage: searchUsage}
	}
	return params, asJSON, nil
}
