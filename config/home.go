package config

import (
	"fmt"
	"path/filepath"
	"strings"
)

// expandHome replaces a leading ~ of a path setting (~ alone, or ~/…)
// with the home folder, as a shell does. A value written where no shell
// reads it (a systemd EnvironmentFile, a launchd plist, a quoted
// assignment) reaches pisyncd with its ~ as it is: PISYNC_HUB_NKEY=~/a.nkey
// was a file not found, and PISYNC_SESSIONS_DIR=~/.pi/agent/sessions a
// folder named ~ made in the working directory. PI_CODING_AGENT_DIR's ~
// is expanded the same way (pi does). ~user is left as it is.
func expandHome(prefix string, home func() (string, error), paths map[string]*string) error {
	for name, p := range paths {
		if strings.HasPrefix(*p, "~") && *p != "~" && !strings.HasPrefix(*p, "~/") {
			// A shell's ~user: taken as it is, it was a folder named so
			// in the daemon's working directory.
			return fmt.Errorf("config: %s_%s %q: only ~/ is put in place of the home folder, not ~user: write the full path", prefix, name, *p)
		}
		if *p != "~" && !strings.HasPrefix(*p, "~/") {
			continue
		}
		h, err := home()
		if err != nil || h == "" {
			return fmt.Errorf("config: %s_%s %q begins with ~, and there is no home directory to put in its place (%v): write the full path", prefix, name, *p, err)
		}
		*p = filepath.Join(h, strings.TrimPrefix(*p, "~"))
	}
	return nil
}
