package cli

import (
	"fmt"
	"strings"

	"github.com/pisyncd/pisyncd/session"
)

// RulesVar is the setting of the context rules (config.Config.Rules reads
// the same variable for the daemon).
const RulesVar = "PISYNC_RULES"

// LoadRules reads PISYNC_RULES alone through lookup (os.LookupEnv), for the
// commands that need no other setting (`context FILE`): a folder or home
// directory that cannot be worked out must not stop them, and pisync links
// no config. Unset or "" is auto, as for the daemon.
func LoadRules(lookup func(string) (string, bool)) (session.RuleSet, error) {
	s, _ := lookup(RulesVar)
	if s == "" {
		return session.RulesAuto, nil
	}
	// In any case, as config reads it.
	r, err := session.ParseRuleSet(strings.ToLower(s))
	if err != nil {
		return 0, fmt.Errorf("%s %q: want auto, seed or pi-1.6", RulesVar, s)
	}
	return r, nil
}

// ContextRules reads --rules; "" (not given) is RulesAuto, which the
// caller replaces by the configured set. usage is the command's usage
// line, for the error.
func ContextRules(s, usage string) (session.RuleSet, error) {
	if s == "" {
		return session.RulesAuto, nil
	}
	r, err := session.ParseRuleSet(s)
	if err != nil {
		return 0, &UsageError{Msg: fmt.Sprintf("context: --rules %q: want auto, seed or pi-1.6", s), Usage: usage}
	}
	return r, nil
}

// RulesNote is the human form's line about the rule set: the one used
// (rules) and the one asked for (mode), "" when the daemon did not say.
func RulesNote(rules, mode string) string {
	switch {
	case rules == "":
		return ""
	case mode != session.RulesAuto.String():
		return "rules " + rules + " (set by --rules or PISYNC_RULES)"
	case rules == session.RulesPi16.String():
		return "rules " + rules + " (auto-chosen: the session holds a line only pi >= 0.86 writes)"
	}
	return "rules " + rules + " (auto-chosen: no line only pi >= 0.86 writes)"
}
