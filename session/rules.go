package session

import (
	"errors"
	"fmt"
	"strings"
)

// RuleSet names the context rules a Tree follows (docs/RULES.md). Only
// the context differs between the sets: reading, the tree, the leaf,
// labels, names, migration and listing are the same in both.
type RuleSet uint8

const (
	// RulesAuto follows RulesPi16 for a session that holds something only
	// pi ≥ 0.86 writes (a system message, a context_edit or usage entry, a
	// compaction's systemMessage) and RulesSeed otherwise. It is the zero
	// value: a Tree decides per session, and changes its mind when such a
	// line arrives.
	RulesAuto RuleSet = iota
	// RulesSeed is the project's contract: pi 0.85.1 plus the design
	// seed's compaction retainedTail rules (shared/spec/pi-sessions.md §7.7).
	RulesSeed
	// RulesPi16 is pi 1.6.0, the current release: compaction systemMessage,
	// system messages dropped from a kept range, only the latest
	// compaction yields a summary, context_edit, system messages reach
	// the model; retainedTail is ignored.
	RulesPi16
)

var ruleNames = [...]string{RulesAuto: "auto", RulesSeed: "seed", RulesPi16: "pi-1.6"}

// String is the name PISYNC_RULES and `context --rules` use.
func (r RuleSet) String() string {
	if int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return fmt.Sprintf("RuleSet(%d)", uint8(r))
}

// ParseRuleSet reads a rule set name: auto, seed or pi-1.6, in any case,
// as PISYNC_RULES takes it (so `context --rules SEED` means what
// PISYNC_RULES=SEED does).
func ParseRuleSet(s string) (RuleSet, error) {
	for r, name := range ruleNames {
		if strings.EqualFold(s, name) {
			return RuleSet(r), nil
		}
	}
	return 0, fmt.Errorf("session: rule set %q: want auto, seed or pi-1.6", s)
}

// ErrContextEdit means a context_edit entry without a replacement applies
// to an entry with editable content: pi 1.6 throws a TypeError reading
// replacement.content.
var ErrContextEdit = errors.New("session: context_edit without replacement")

// SetRules chooses the rule set (RulesAuto by default). Contexts built
// afterwards follow it; nothing already built changes.
func (t *Tree) SetRules(mode RuleSet) {
	before := t.Rules()
	t.mode = mode
	if t.Rules() != before {
		t.cur.valid = false
	}
}

// RuleMode is the rule set chosen with SetRules.
func (t *Tree) RuleMode() RuleSet { return t.mode }

// Rules is the rule set contexts follow now: the chosen one, or for
// RulesAuto the one the session's lines call for.
func (t *Tree) Rules() RuleSet {
	switch {
	case t.mode != RulesAuto:
		return t.mode
	case t.newer:
		return RulesPi16
	}
	return RulesSeed
}

// Newer reports whether the session holds a line only pi ≥ 0.86 writes,
// which makes RulesAuto follow RulesPi16.
func (t *Tree) Newer() bool { return t.newer }

// markNewer records a line only pi ≥ 0.86 writes.
func (t *Tree) markNewer() {
	if t.newer {
		return
	}
	before := t.Rules()
	t.newer = true
	if t.Rules() != before {
		t.cur.valid = false
	}
}
