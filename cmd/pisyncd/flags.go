package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// usageError is a command-line mistake (exit code 2): what was wrong,
// naming the flag or argument, and the command's usage line.
type usageError struct {
	msg, usage string
}

func (e *usageError) Error() string {
	if e.usage == "" {
		return e.msg
	}
	return e.msg + "\nusage: " + e.usage
}

// Is makes every usageError an errUsage, the exit-code-2 class.
func (e *usageError) Is(target error) bool { return target == errUsage }

// helpRequest is -h or --help on a subcommand: its usage goes to stdout and
// the exit code is 0, as for `pisyncd help`.
type helpRequest struct {
	usage string
	fs    *flag.FlagSet
}

func (h *helpRequest) Error() string { return "help requested" }

func (h *helpRequest) print(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", h.usage)
	if h.fs == nil {
		return
	}
	var b strings.Builder
	h.fs.SetOutput(&b)
	h.fs.PrintDefaults()
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", b.String())
	}
}

// parseArgs parses a subcommand's flags and checks that want positional
// arguments remain (-1: any number). -h/--help asks for the usage; a flag
// that is not defined or lacks its value is named in the error, as is a
// wrong number of arguments.
func parseArgs(fs *flag.FlagSet, args []string, usage string, want int) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{usage: usage, fs: fs}
		}
		return &usageError{msg: fs.Name() + ": " + err.Error(), usage: usage}
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
		return &usageError{msg: msg, usage: usage}
	}
	return nil
}

// wantsHelp reports whether args ask for help in the one form a command
// without flags understands.
func wantsHelp(args []string) bool {
	return len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help")
}
