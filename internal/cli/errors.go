package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WantsJSON reports whether a command's arguments ask for JSON output, in
// any form the flag package takes (--json, -json, --json=true), before a
// "--" that ends the flags. Its errors are then JSON too: a script piping
// `status --json` into jq otherwise met a plain "pisyncd: ..." line on
// stderr it could not parse, and had only the exit code to branch on.
func WantsJSON(args []string) bool {
	want := false
	for _, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		want = true
		if hasValue {
			// The last one counts, as in the flag package.
			want, _ = strconv.ParseBool(value)
		}
	}
	return want
}

// errorJSON is a failed command's one line on stderr under --json.
type errorJSON struct {
	Error string `json:"error"`
	Usage string `json:"usage,omitempty"`
	Exit  int    `json:"exit"`
}

// WriteError writes a failed command's error to w, as one JSON object
// ({"error", "usage", "exit"}) when asJSON, else as "prog: message", and
// returns the exit code: 2 for a usage error, 1 for any other.
func WriteError(w io.Writer, prog string, err error, asJSON bool) int {
	code := ExitCode(err)
	if !asJSON {
		fmt.Fprintln(w, prog+":", err)
		return code
	}
	out := errorJSON{Error: err.Error(), Exit: code}
	var ue *UsageError
	if errors.As(err, &ue) {
		out.Error, out.Usage = ue.Msg, ue.Usage
	}
	b, merr := json.Marshal(out)
	if merr != nil { // strings and an int: cannot fail
		fmt.Fprintln(w, prog+":", err)
		return code
	}
	fmt.Fprintf(w, "%s\n", b)
	return code
}

// ExitCode is a failed command's exit code: 2 for a usage error, 1 for
// any other.
func ExitCode(err error) int {
	if errors.Is(err, ErrUsage) {
		return 2
	}
	return 1
}
