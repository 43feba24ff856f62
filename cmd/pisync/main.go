// Command pisync is pisyncd's lean client for the commands that need only
// a file: `pisync context FILE` prints the context pi would build from a
// session file, as `pisyncd context FILE` does (the same code,
// internal/cli), in a binary without the embedded NATS server, the search
// index, the web view or the metrics, so that a one-shot call starts in a
// few milliseconds instead of pisyncd's ten to fifteen. Everything that
// needs the daemon or its store stays in pisyncd (the split of tailscale
// and tailscaled).
package main

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"

	"github.com/pisyncd/pisyncd/internal/cli"
)

// version names a release: release builds pass -ldflags
// "-X main.version=v1.2.0", as for pisyncd.
var version string

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `pisync: pisyncd's lean client, for what needs only a session file.

Usage:
  pisync context FILE [--leaf ID] [--rules auto|seed|pi-1.6] [--json]
                          the LLM context pi would build from the session file FILE (pi's rules,
                          no daemon): what pisyncd context FILE prints, started in a fraction of
                          the time
  pisync version [--json] this binary's version, VCS revision and Go version
  pisync help             this text

Every command takes -h for its own flags. The rule set is --rules, else PISYNC_RULES, else auto.
Everything else (the daemon, status, a session's context by id, search, the web view) is pisyncd.
`

const contextUsage = "pisync context FILE [--leaf ID] [--rules auto|seed|pi-1.6] [--json]"

// Main runs one command and returns the process exit code: 0 success, 1
// failure, 2 a usage error, as pisyncd's.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "context":
		err = contextCommand(args, stdout)
	case "version", "--version", "-version":
		err = cli.VersionCommand("pisync", version, args, stdout)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usageText)
		return 0
	default:
		err = &cli.UsageError{Msg: fmt.Sprintf("unknown command %q (pisync help lists them; the others are pisyncd's)", cmd)}
	}
	if err == nil {
		return 0
	}
	var help *cli.HelpRequest
	if errors.As(err, &help) {
		help.Print(stdout)
		return 0
	}
	return cli.WriteError(stderr, "pisync", err, cli.WantsJSON(args))
}

// contextCommand is `pisync context FILE`: the argument must name a
// session file; a session id is pisyncd's to answer (its daemon or store).
func contextCommand(args []string, stdout io.Writer) error {
	err := cli.ContextFile(args, stdout, contextUsage, os.LookupEnv)
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%w (pisync reads session files; for a session id, use pisyncd context ID)", err)
	}
	return err
}
