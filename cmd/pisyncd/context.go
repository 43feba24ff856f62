package main

import (
	"io"
	"os"

	"github.com/pisyncd/pisyncd/internal/cli"
	"github.com/pisyncd/pisyncd/session"
)

// contextFileCommand is `pisyncd context FILE`: pi's rules applied to the
// file directly, no daemon needed; the same code as `pisync context FILE`
// (internal/cli).
func contextFileCommand(args []string, stdout io.Writer) error {
	return cli.ContextFile(args, stdout, contextUsage, os.LookupEnv)
}

// contextRules reads --rules; "" (not given) is RulesAuto, which the
// caller replaces by the configured set.
func contextRules(s string) (session.RuleSet, error) { return cli.ContextRules(s, contextUsage) }

// The context commands' flag texts, shared with pisync.
const (
	contextJSONUsage  = cli.ContextJSONUsage
	contextRulesUsage = cli.ContextRulesUsage
)

var contextValued = cli.ContextValued
