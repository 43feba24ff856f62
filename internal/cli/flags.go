package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// ErrUsage marks a command-line mistake (exit code 2).
var ErrUsage = errors.New("usage")

// UsageError is a command-line mistake (exit code 2): what was wrong,
// naming the flag or argument, and the command's usage line.
type UsageError struct {
	Msg, Usage string
}

func (e *UsageError) Error() string {
	if e.Usage == "" {
		return e.Msg
	}
	return e.Msg + "\nusage: " + e.Usage
}

// Is makes every UsageError an ErrUsage, the exit-code-2 class.
func (e *UsageError) Is(target error) bool { return target == ErrUsage }

// HelpRequest is -h or --help on a subcommand: its usage goes to stdout
// and the exit code is 0, as for `pisyncd help`.
type HelpRequest struct {
	Usage string
	FS    *flag.FlagSet
}

func (h *HelpRequest) Error() string { return "help requested" }

// Print writes the usage line and the flags, if any.
func (h *HelpRequest) Print(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", h.Usage)
	if h.FS == nil {
		return
	}
	var b strings.Builder
	h.FS.SetOutput(&b)
	h.FS.PrintDefaults()
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", doubleDash.ReplaceAllString(b.String(), "$1--"))
	}
}

// doubleDash finds the flag names PrintDefaults writes with Go's one dash
// ("  -json"): help shows them as --json, the form every usage line and
// the docs use (the flag package takes both).
var doubleDash = regexp.MustCompile(`(?m)^(  )-`)

// ParseArgs parses a subcommand's flags and checks that want positional
// arguments remain (-1: any number). -h/--help asks for the usage; a flag
// that is not defined or lacks its value is named in the error, as is a
// wrong number of arguments.
func ParseArgs(fs *flag.FlagSet, args []string, usage string, want int) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &HelpRequest{Usage: usage, FS: fs}
		}
		return &UsageError{Msg: fs.Name() + ": " + err.Error(), Usage: usage}
	}
	if want >= 0 && fs.NArg() != want {
		var msg string
		switch {
		case want == 0:
			msg = fmt.Sprintf("%s takes no arguments, got %q", fs.Name(), fs.Args())
		case fs.NArg() < want:
			msg = fmt.Sprintf("%s: missing argument", fs.Name())
		default:
			msg = fmt.Sprintf("%s: too many arguments: %q", fs.Name(), fs.Args()[want:])
		}
		return &UsageError{Msg: msg, Usage: usage}
	}
	return nil
}

// WantsHelp reports whether args ask for help in the one form a command
// without flags understands.
func WantsHelp(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}

// Reorder moves flags before positional arguments, so `events ID --json`
// works as well as `events --json ID`. valued names the flags that take a
// value in the next argument (--leaf ID); one given last, without its
// value, is left for the flag package to name.
func Reorder(args []string, valued ...string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && slices.Contains(valued, name) {
			if i+1 == len(args) {
				// The flag's value is missing. Moved before the
				// positionals it took the first of them for its
				// value (`context FILE --leaf` was "missing
				// argument", FILE given), and left after them the
				// flag package never reads it: without them it
				// names the flag ("flag needs an argument: -leaf").
				return flags
			}
			i++
			flags = append(flags, args[i])
		}
	}
	return append(flags, pos...)
}
