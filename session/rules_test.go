package session

import "testing"

// TestParseRuleSet: a rule set's name is read in any case, as
// PISYNC_RULES reads it, and anything else is refused with the names.
func TestParseRuleSet(t *testing.T) {
	for in, want := range map[string]RuleSet{
		"auto": RulesAuto, "seed": RulesSeed, "pi-1.6": RulesPi16,
		"AUTO": RulesAuto, "Seed": RulesSeed, "PI-1.6": RulesPi16,
	} {
		got, err := ParseRuleSet(in)
		if err != nil || got != want {
			t.Errorf("ParseRuleSet(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "pi16", "seed ", "1.6"} {
		if _, err := ParseRuleSet(in); err == nil {
			t.Errorf("ParseRuleSet(%q) took it; want an error naming auto, seed or pi-1.6", in)
		}
	}
}
