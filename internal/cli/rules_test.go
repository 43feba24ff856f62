package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/session"
)

// TestLoadRules: `context FILE` reads PISYNC_RULES alone, as the daemon's
// configuration reads it (config.Load): the same sets for the same
// values, the same verdict and the same words for a wrong one, and auto
// when it is unset or empty (config's test pins config's side; the
// comparison keeps pisync, which links no config, from drifting).
func TestLoadRules(t *testing.T) {
	t.Setenv("PISYNC_SESSIONS_DIR", t.TempDir())
	t.Setenv("PISYNC_STATE_DIR", t.TempDir())
	for _, v := range []string{"", "auto", "seed", "pi-1.6", "pi-1.5", "Seed", " auto", "1.6.0"} {
		t.Setenv("PISYNC_RULES", v)
		got, err := LoadRules(os.LookupEnv)
		c, cerr := config.Load()
		switch {
		case (err == nil) != (cerr == nil):
			t.Errorf("PISYNC_RULES=%q: %v here, %v in config", v, err, cerr)
		case err != nil:
			for _, part := range []string{"PISYNC_RULES", `"` + v + `"`, "auto, seed or pi-1.6"} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("PISYNC_RULES=%q: error %q does not name %s", v, err, part)
				}
			}
		case got != c.RuleSet():
			t.Errorf("PISYNC_RULES=%q: %v here, %v in config", v, got, c.RuleSet())
		}
	}
	got, err := LoadRules(func(string) (string, bool) { return "", false })
	if err != nil || got != session.RulesAuto {
		t.Errorf("PISYNC_RULES unset: %v, %v; want auto", got, err)
	}
}
