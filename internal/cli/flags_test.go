package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestHelpShowsDoubleDash: -h lists the flags as --json, --session string,
// the form the usage line and the docs give, not Go's -json (before,
// `pisyncd status -h` said "usage: pisyncd status [--json]" above "-json").
func TestHelpShowsDoubleDash(t *testing.T) {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.Bool("json", false, "print JSON")
	fs.String("session", "", "only this session\n-x in a second line stays as it is")
	err := ParseArgs(fs, []string{"-h"}, "pisyncd status [--json]", 0)
	help, ok := err.(*HelpRequest)
	if !ok {
		t.Fatalf("-h: %v", err)
	}
	var out bytes.Buffer
	help.Print(&out)
	got := out.String()
	for _, want := range []string{"usage: pisyncd status [--json]\n", "\n  --json\n", "\n  --session string\n", "\n    \t-x in a second line"} {
		if !strings.Contains(got, want) {
			t.Errorf("help lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\n  -json") {
		t.Errorf("help still shows -json:\n%s", got)
	}
}

// TestValuedFlagWithoutValue: a flag that takes a value, given last
// without one, is named as the flag package names it. Reorder moved it
// before the positionals, where it took FILE for its value, and `context
// FILE --leaf` said "missing argument" with FILE given (a probe's finding).
func TestValuedFlagWithoutValue(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{
		{"s.jsonl", "--leaf"},
		{"s.jsonl", "--rules"},
		{"s.jsonl", "--json", "--leaf"},
		{"--json", "s.jsonl", "-leaf"},
	} {
		err := ContextFile(args, io.Discard, "pisync context FILE", none)
		flagName := strings.TrimLeft(args[len(args)-1], "-")
		want := "flag needs an argument: -" + flagName
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a usage error saying %q", args, err, want)
		}
	}
	// A value given still goes with its flag, the positionals after.
	got := Reorder([]string{"F", "--leaf", "x", "--json"}, "leaf")
	if want := []string{"--leaf", "x", "--json", "F"}; !slices.Equal(got, want) {
		t.Errorf("Reorder: %q, want %q", got, want)
	}
}
