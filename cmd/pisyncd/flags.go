package main

import (
	"flag"

	"github.com/pisyncd/pisyncd/internal/cli"
)

// The flag handling every command shares, pisync's too (internal/cli).
type (
	usageError  = cli.UsageError
	helpRequest = cli.HelpRequest
)

// errUsage marks a command-line mistake (exit code 2).
var errUsage = cli.ErrUsage

func parseArgs(fs *flag.FlagSet, args []string, usage string, want int) error {
	return cli.ParseArgs(fs, args, usage, want)
}

func wantsHelp(args []string) bool { return cli.WantsHelp(args) }

func reorder(args []string, valued ...string) []string { return cli.Reorder(args, valued...) }
