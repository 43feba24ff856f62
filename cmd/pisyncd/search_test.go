package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/search"
)

// searchOn turns the full-text index on in a station's configuration (the
// test configurations leave it off: "" is off).
func searchOn(c *config.Config) { c.Search = "on" }

// searchVia runs `pisyncd search ARGS --json` against s's daemon.
func searchVia(t *testing.T, s *station, args ...string) (search.Result, error) {
	t.Helper()
	stationEnv(t, s.cfg)
	var out bytes.Buffer
	err := searchCommand(append(args, "--json"), &out)
	var res search.Result
	if err == nil {
		if derr := json.Unmarshal(out.Bytes(), &res); derr != nil {
			t.Fatalf("search output %q: %v", out.String(), derr)
		}
	}
	return res, err
}

// waitSearch waits until s's index answers q with want hits.
func waitSearch(t *testing.T, s *station, want uint64, args ...string) search.Result {
	t.Helper()
	var res search.Result
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var err error
		res, err = searchVia(t, s, args...)
		return err == nil && res.Total == want, s.name + ": " + strings.Join(args, " ") + ": " + describe(res, err)
	})
	return res
}

func describe(res search.Result, err error) string {
	if err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(res)
	return string(b)
}

// TestSearchAcrossMachines: a line written on A is found on B, with A as
// its node, through `pisyncd search` over B's control socket; the text
// output makes a hostile line inert on a terminal; a bad query is refused
// with the reason; a restart keeps the index and indexes nothing again.
func TestSearchAcrossMachines(t *testing.T) {
	hub := startTestHub(t)
	a := newStationWith(t, "ws-a", hub.url(), "", searchOn)
	b := newStationWith(t, "ws-b", hub.url(), "", searchOn)

	sid := "0199ffff-0000-7000-8000-00000000a001"
	rel := sessionRel("/work/frob", sid)
	mustWriteLines(t, filepath.Join(a.cfg.SessionsDir, rel), []string{
		hdrLine(sid, "/work/frob"),
		msgLine("e1", "", "please fix the frobnicator"),
		// JSON escapes: the line is valid, its text holds the controls.
		`{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-11-30T00:00:02.000Z","message":{"role":"user","content":"evil \u001b]0;pwned\u0007 \u001b[2J frobnicator output","timestamp":2}}`,
	})
	res := waitSearch(t, b, 2, "frobnicator")
	for _, h := range res.Hits {
		if h.SessionID != sid || h.Node != "ws-a" || h.Type != "message" || h.Role != "user" {
			t.Errorf("hit on B: %+v", h)
		}
	}
	waitSearch(t, a, 2, "frobnicator", "--session", sid)
	waitSearch(t, b, 1, `"fix the frobnicator"`)
	waitSearch(t, b, 1, "frobnicator", "-please")
	waitSearch(t, b, 0, "frobnicator", "--node", "ws-b")

	// Text output: the escape sequences are gone, the match is marked.
	stationEnv(t, b.cfg)
	var out bytes.Buffer
	if err := searchCommand([]string{"frobnicator", "output"}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(out.String(), '\x1b') || strings.ContainsRune(out.String(), '\x07') || !strings.Contains(out.String(), "«frobnicator»") || !strings.Contains(out.String(), sid) ||
		!strings.HasPrefix(out.String(), "1 hit\n") {
		t.Errorf("text output:\n%q", out.String())
	}
	// A bad query: the reason, not a status line or JSON.
	if _, err := searchVia(t, b, `"unclosed`); err == nil || !strings.Contains(err.Error(), "unclosed quote") || strings.Contains(err.Error(), "{") {
		t.Errorf("bad query: %v", err)
	} else if ue := (*usageError)(nil); !errors.As(err, &ue) {
		t.Errorf("bad query: %T, not a usage error (exit 2)", err) // it was exit 1: a newcomer probe, 2026-12-07
	}
	st, err := b.status()
	if err != nil || st.Search == nil || st.Search.Docs < 3 || st.Search.IndexBytes == 0 {
		t.Fatalf("status: %+v, %v", st.Search, err)
	}
	// The counter follows the batch's write, which searches see first.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		v := metricValue(t, b, "pisyncd_search_docs_indexed_total")
		return v >= 3, fmt.Sprintf("pisyncd_search_docs_indexed_total = %v", v)
	})

	// A restart resumes: nothing is indexed again, the index answers.
	b.stop()
	b.start()
	waitSearch(t, b, 2, "frobnicator")
	appendLine(t, filepath.Join(a.cfg.SessionsDir, rel), msgLine("e3", "e2", "zanzibar arrives later"))
	waitSearch(t, b, 1, "zanzibar")
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err = b.status()
		return err == nil && st.Search != nil && st.Search.Indexed >= 1, "the new line counted"
	})
	if st.Search.Indexed != 1 {
		t.Errorf("after the restart B indexed %+v (want 1 document: the new line)", st.Search)
	}
}

// TestSearchRebuiltAtRestart: an index missing at a start (removed, or of
// an older format, as after an upgrade) is built again from the streams
// at once. It starts once the projection has handled the first read,
// which after a restart with nothing new must not wait for a new line.
func TestSearchRebuiltAtRestart(t *testing.T) {
	s := newStationWith(t, "ws-a", "", "", func(c *config.Config) { c.HubURLs = nil; searchOn(c) })
	sid := "0199ffff-0000-7000-8000-00000000a002"
	mustWriteLines(t, filepath.Join(s.cfg.SessionsDir, sessionRel("/work/frob", sid)), []string{
		hdrLine(sid, "/work/frob"),
		msgLine("e1", "", "a bug in parser.go"),
		msgLine("e2", "e1", "fixed in read_config_file"),
	})
	waitSearch(t, s, 1, "parser.go")
	s.stop()
	if err := os.RemoveAll(filepath.Join(s.cfg.StateDir, "search")); err != nil {
		t.Fatal(err)
	}
	s.start()
	waitSearch(t, s, 1, "parser")
	waitSearch(t, s, 1, "config")
}

// TestPrintHitsUnindexed: the text output says when the index has lines
// yet to add (its first build, a backlog), so "0 hits" is not taken for
// an answer.
func TestPrintHitsUnindexed(t *testing.T) {
	for n, want := range map[int64]string{0: "", 1: "yet to add 1 line:", 12345: "yet to add 12345 lines:"} {
		var out bytes.Buffer
		if err := printHits(&out, search.Result{Unindexed: n}); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(out.String(), "yet to add")
		if got != (want != "") || !strings.Contains(out.String(), want) {
			t.Errorf("unindexed %d: %q, want %q", n, out.String(), want)
		}
	}
}

// TestSearchArgs: the command's flags take two dashes; a word with one is
// the query's exclusion, whatever it spells (before, -json, -node and -help
// were taken for flags, and -node swallowed the next word as its value);
// -h and --help ask for the usage; -- ends the flags; --json=false is false.
func TestSearchArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		q      string
		node   string
		asJSON bool
		err    string
	}{
		{args: []string{"zebra", "-node"}, q: "zebra -node"},
		{args: []string{"zebra", "-json"}, q: "zebra -json"},
		{args: []string{"zebra", "-help"}, q: "zebra -help"},
		{args: []string{"zebra", "--help"}, err: "Usage"},
		{args: []string{"-node", "foo", "bar"}, q: "-node foo bar"},
		{args: []string{"--node", "foo", "bar"}, q: "bar", node: "foo"},
		{args: []string{"--node=foo", "bar", "--json"}, q: "bar", node: "foo", asJSON: true},
		{args: []string{"--json=false", "x"}, q: "x"},
		{args: []string{"--json=maybe", "x"}, err: "want true or false"},
		{args: []string{"x", "--", "--json", "--node"}, q: "x --json --node"},
		{args: []string{"--force", "push"}, q: "--force push"},
		{args: []string{"-h"}, err: "Usage"},
		{args: []string{"--node"}, err: "--node needs a value"},
		{args: []string{"--json"}, err: "missing the query"},
	} {
		params, asJSON, err := searchArgs(c.args)
		switch {
		case c.err != "":
			var msg string
			if err != nil {
				msg = err.Error()
				var h *helpRequest
				if errors.As(err, &h) {
					msg = "Usage: " + h.Usage
				}
			}
			if !strings.Contains(msg, c.err) {
				t.Errorf("%q: %v, want an error holding %q", c.args, err, c.err)
			}
		case err != nil || params.Get("q") != c.q || params.Get("node") != c.node || asJSON != c.asJSON:
			t.Errorf("%q: q %q node %q json %v (%v), want q %q node %q json %v", c.args, params.Get("q"), params.Get("node"), asJSON, err, c.q, c.node, c.asJSON)
		}
	}
}

// TestStatusShowsTheSearchIndex: plain status has the row search's "the
// index has yet to add N lines: pisyncd status shows its progress" points
// to (only status --json had it: a probe, 2026-12-07).
func TestStatusShowsTheSearchIndex(t *testing.T) {
	for _, c := range []struct {
		lag  int64
		want string
	}{{3, "search index  10 documents, 4096 bytes; 3 messages still to add"}, {0, "search index  10 documents, 4096 bytes; up to date"}} {
		var b bytes.Buffer
		if err := printStatus(&b, &Status{Search: &search.Stats{Lag: c.lag, Docs: 10, IndexBytes: 4096}}); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^search index +` + regexp.QuoteMeta(strings.TrimPrefix(c.want, "search index  "))).MatchString(b.String()) {
			t.Errorf("lag %d: no %q in\n%s", c.lag, c.want, b.String())
		}
	}
}
