package web

import (
	"os/exec"
	"strings"
	"testing"
	"unicode"
)

// TestShellQuoteShowsWhatRuns: the resume command's path, which holds what
// a teammate's cwd held, shows no character that is not printable (a bidi
// control showed the command reversed: a web probe, 2026-12-07), and bash
// reads the quoted path back byte for byte.
func TestShellQuoteShowsWhatRuns(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here to read the quoted paths back")
	}
	for _, p := range []string{
		"/home/u/.pi/agent/sessions/--home-u-p--/s.jsonl",
		"/home/u/--home-u-\u202etxt.exe--/a b's.jsonl",
		"/x/new\nline/esc\x1b[31m/tab\t/back\\slash/'q'",
		"/x/bad\xffbyte/\U000e0001tag/\u2066iso\u2069",
		"/x/ünïcode/日本/emoji😀",
	} {
		q := shellQuote(p)
		if i := strings.IndexFunc(q, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
			t.Errorf("%q quoted as %q, which shows a character that is not printable", p, q)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != p {
			t.Errorf("%q quoted as %q reads back as %q (%v)", p, q, out, err)
		}
	}
}
