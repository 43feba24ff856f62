// Command pisyncd keeps pi coding-agent sessions as immutable events on NATS
// JetStream and in sync across machines. `pisyncd` alone runs the daemon;
// the other subcommands inspect it, run a hub node or install a service.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/internal/cli"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `pisyncd: every line pi appends to a session file, as an immutable event on NATS JetStream.

Usage:
  pisyncd [run]                      run the daemon (embedded NATS, zero set-up)
  pisyncd status [--json]            node, files, sessions, entries published, stream position
  pisyncd events SESSION-ID [--json] the stored events of one session: this machine's, then the
                                     other machines' it copied, each in stream order
  pisyncd context FILE|SESSION-ID [--leaf ID] [--rules auto|seed|pi-1.6] [--json]
                                     the LLM context pi would build: from FILE (pi's rules, no daemon
                                     needed) or from the live projection of a session
  pisyncd ls [--json]                the catalog of every session, newest first
  pisyncd search QUERY... [--json] [--limit N] [--after N] [--session ID] [--node ID]
                                     full-text search of every session known here (words, "phrases",
                                     -excluded, session:/node:/type:/role: filters)
  pisyncd tail [--session ID] [--type T] [--json] [--from-start]
                                     follow new entries as they arrive
  pisyncd web                        the web view's link, with the token it needs (every session,
                                     live, as a tree; on PISYNC_HTTP_ADDR)
  pisyncd erase SESSION-ID [--json]  remove a session from this machine for good (its files, its
                                     copies in the trash, its lines in the store) and, with a hub,
                                     from every machine of the team; then pisyncd hub erase
  pisyncd key init|export|import [FILE]|status|rotate|token SESSION-ID [--json]
                                     the team key of end-to-end encryption: the hub stores and relays
                                     only ciphertext (docs/SECURITY.md)
  pisyncd hub                        run a hub node that workstations join (see pisyncd hub help)
  pisyncd service [systemd|launchd] [--install]
                                     print (or install) a user service file for this binary
  pisyncd version [--json]           this binary's version, VCS revision and Go version
  pisyncd help [COMMAND]             this text and every setting, or one command's help

Every command takes -h for its own flags. pisync (go install ./cmd/pisync) runs the one-shot
context FILE with the same code in a lean binary that starts in a fraction of pisyncd's time.

Settings are environment variables:
`

// Main runs one command and returns the process exit code: 0 success, 1
// failure, 2 a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	if (cmd == "--json" || cmd == "-json") && len(args) > 0 {
		// `pisyncd --json status`, as other tools take their output
		// flag: the command's own --json (it said "unknown command").
		cmd, args = args[0], append(args[1:len(args):len(args)], "--json")
	}
	var err error
	switch cmd {
	case "run":
		err = runCommand(args, stderr)
	case "status":
		err = statusCommand(args, stdout)
	case "events":
		err = eventsCommand(args, stdout)
	case "context":
		err = contextCommand(args, stdout)
	case "ls":
		err = lsCommand(args, stdout)
	case "tail":
		err = tailCommand(args, stdout, stderr)
	case "search":
		err = searchCommand(args, stdout)
	case "erase":
		err = eraseCommand(args, stdout)
	case "web":
		err = webCommand(args, stdout)
	case "hub":
		err = hubCommand(args, stdout, stderr)
	case "key":
		err = keyCommand(args, stdout)
	case "service":
		err = serviceCommand(args, stdout)
	case "version", "--version", "-version":
		err = cli.VersionCommand("pisyncd", version, args, stdout)
	case "help", "-h", "--help", "-help":
		if len(args) > 0 && !wantsHelp(args[:1]) && args[0] != "help" {
			// A command's own help, as its -h gives it, and an unknown
			// command's usage error (it printed this whole text, and
			// for "help bogus" too, with exit 0).
			return Main([]string{args[0], "-h"}, stdout, stderr)
		}
		fmt.Fprint(stdout, usageText)
		if err := config.Usage(stdout); err != nil {
			fmt.Fprintln(stderr, "pisyncd:", err)
			return 1
		}
		return 0
	default:
		err = &usageError{Msg: fmt.Sprintf("unknown command %q (pisyncd help lists them)", cmd)}
	}
	if err == nil {
		return 0
	}
	var help *helpRequest
	if errors.As(err, &help) {
		help.Print(stdout)
		return 0
	}
	if prefix, ok := daemonLogPrefix(cmd, args); ok && strings.EqualFold(os.Getenv(prefix+"_LOG_FORMAT"), "json") {
		// A daemon whose log is JSON ends with a JSON record: a log
		// pipeline that parses each line saw its INFO lines and then a
		// plain "pisyncd: ..." line it could not read.
		slog.New(slog.NewJSONHandler(stderr, nil)).Error("pisyncd failed", "err", err.Error())
		return cli.ExitCode(err)
	}
	return cli.WriteError(stderr, "pisyncd", err, cli.WantsJSON(args))
}

// daemonLogPrefix is the settings prefix of the daemon cmd args runs (a
// workstation's or a hub node's), whose log is in PREFIX_LOG_FORMAT; ok is
// false for the other commands, whose errors are for a person.
func daemonLogPrefix(cmd string, args []string) (prefix string, ok bool) {
	switch {
	case cmd == "run":
		return config.Prefix, true
	case cmd == "hub" && len(args) == 0:
		return config.HubPrefix, true
	}
	return "", false
}

// outliveLogReader keeps a long-running process (the daemon, a hub node)
// going when the reader of its log goes away: `pisyncd 2>&1 | tee log` and
// tee is killed, a log collector restarted. Unless SIGPIPE is handled, Go
// ends a program whose write to a broken pipe on stdout or stderr fails, so
// the next log line would stop the syncing. Ignored, the write fails with
// EPIPE and slog drops the line. Not for the short commands: `pisyncd tail |
// head` is to end with head. restore puts the default back.
func outliveLogReader() (restore func()) {
	signal.Ignore(syscall.SIGPIPE)
	return func() { signal.Reset(syscall.SIGPIPE) }
}

// signalContext is cancelled by the first SIGINT or SIGTERM (or signal of
// more); a second one exits at once.
func signalContext(stderr io.Writer, more ...os.Signal) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, append([]os.Signal{syscall.SIGINT, syscall.SIGTERM}, more...)...)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(fmt.Errorf("received %v", sig))
		case <-done:
			return
		}
		select {
		case sig := <-ch:
			fmt.Fprintf(stderr, "pisyncd: second %v, exiting now\n", sig)
			os.Exit(130)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}
