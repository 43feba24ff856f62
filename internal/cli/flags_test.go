package cli

import (
	"bytes"
	"flag"
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
