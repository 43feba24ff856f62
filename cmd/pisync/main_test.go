package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/session"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestContextConformance: `pisync context FILE --json` prints, for every
// file of the conformance corpus, exactly the bytes of the context built
// whole in memory and marshalled by encoding/json, with the rule set first
// (the daemon's /context shape), and a newline, and fails where loading fails; the human form names the leaf.
func TestContextConformance(t *testing.T) {
	t.Setenv("PISYNC_RULES", "")
	files, err := filepath.Glob(filepath.Join(testenv.ConformanceDir(t), "*.jsonl"))
	if err != nil || len(files) < 20 {
		t.Fatalf("conformance corpus: %d files, %v", len(files), err)
	}
	for _, f := range files {
		want, werr := reportOf(f)
		code, out, stderr := run(t, "context", f, "--json")
		switch {
		case werr != nil && code != 1:
			t.Errorf("%s: exit %d, want 1 (%v)", filepath.Base(f), code, werr)
		case werr == nil && (code != 0 || out != want):
			t.Errorf("%s: exit %d %s\ngot  %.300s\nwant %.300s", filepath.Base(f), code, stderr, out, want)
		}
		if werr != nil {
			continue
		}
		if code, out, _ := run(t, "context", f); code != 0 || !strings.HasPrefix(out, "leaf ") {
			t.Errorf("%s: human form: exit %d, %.200s", filepath.Base(f), code, out)
		}
	}
}

func reportOf(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if len(data) == 0 {
		// pi writes a header into an empty file, and its context is
		// empty (the corpus's empty-file case).
		data = []byte(`{"type":"session","version":3,"id":""}`)
	}
	f, err := session.Load(data)
	if err != nil {
		return "", err
	}
	c, err := f.Context()
	if err != nil {
		return "", err
	}
	// json.Marshal compacts and escapes (<, >, &, U+2028/9) what
	// MarshalJSON writes, as the streamed writer does.
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return `{"rules":"` + c.Rules.String() + `","rulesMode":"auto",` + string(b[1:]) + "\n", nil
}

// TestMainExits: exit codes and messages as pisyncd's: 0 with the usage
// for help, 2 for a usage mistake, 1 for a failure, and a session id (no
// such file) points at pisyncd.
func TestMainExits(t *testing.T) {
	file := filepath.Join(testenv.ConformanceDir(t), "basic-linear.jsonl")
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{nil, 2, "", "Usage:"},
		{[]string{"help"}, 0, "pisync context FILE", ""},
		{[]string{"context", "-h"}, 0, "usage: pisync context FILE", ""},
		{[]string{"context"}, 2, "", "context: missing argument"},
		{[]string{"context", file, file}, 2, "", "too many arguments"},
		{[]string{"context", file, "--rules", "pi-1.5"}, 2, "", `--rules "pi-1.5"`},
		{[]string{"context", file, "--bogus"}, 2, "", "flag provided but not defined"},
		{[]string{"context", "0199aaaa-0000-7000-8000-0000000000f1"}, 1, "", "use pisyncd context ID"},
		{[]string{"context", t.TempDir()}, 1, "", "is a folder"},
		{[]string{"context", file, "--leaf", "nope"}, 1, "", "nope"},
		{[]string{"context", file, "--rules", "pi-1.6", "--json"}, 0, `{"rules":"pi-1.6","rulesMode":"pi-1.6",`, ""},
		{[]string{"version"}, 0, "pisync ", ""},
		{[]string{"version", "x"}, 2, "", "version takes no arguments"},
		{[]string{"--version", "--json"}, 0, `{"version":"`, ""},
		{[]string{"version", "--bogus", "--json"}, 2, "", `"usage":"pisync version [--json]"`},
		{[]string{"status"}, 2, "", "the others are pisyncd's"},
		// Under --json the error is JSON too.
		{[]string{"context", file, "--json", "--leaf", "nope"}, 1, "", `{"error":"`},
		{[]string{"context", file, "--json", "--rules", "pi-1.5"}, 2, "", `"usage":"pisync context FILE`},
	} {
		code, out, errOut := run(t, c.args...)
		if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
			t.Errorf("pisync %q: exit %d (want %d)\nstdout %.300s\nstderr %.300s", c.args, code, c.code, out, errOut)
		}
	}
	t.Setenv("PISYNC_RULES", "bogus")
	if code, _, errOut := run(t, "context", file); code != 1 || !strings.Contains(errOut, `PISYNC_RULES "bogus"`) {
		t.Errorf("PISYNC_RULES=bogus: exit %d, %s", code, errOut)
	}
}
