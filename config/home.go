package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// pathSettings settles the path settings of paths (by name, without the
// prefix). A leading ~ (~ alone, or ~/…) is replaced with the home folder,
// as a shell does: a value written where no shell reads it (a systemd
// EnvironmentFile, a launchd plist, a quoted assignment) reaches pisyncd
// with its ~ as it is, and PISYNC_HUB_NKEY=~/a.nkey was a file not found,
// PISYNC_SESSIONS_DIR=~/.pi/agent/sessions a folder named ~ made in the
// working directory. ~user is refused. So is a relative path, which each
// command would find from the folder it runs in: a service runs in /, a
// shell elsewhere, and they looked in two places (a command found no
// daemon, or made a second store; a store key file written from one
// folder was missing from another, and the encrypted store locked).
func pathSettings(prefix string, home func() (string, error), paths map[string]*string) error {
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		p := paths[name]
		if strings.HasPrefix(*p, "~") && *p != "~" && !strings.HasPrefix(*p, "~/") {
			// A shell's ~user: taken as it is, it was a folder named so
			// in the daemon's working directory.
			return fmt.Errorf("config: %s_%s %q: only ~/ is put in place of the home folder, not ~user: write the full path", prefix, name, *p)
		}
		if *p == "~" || strings.HasPrefix(*p, "~/") {
			h, err := home()
			if err != nil || h == "" {
				return fmt.Errorf("config: %s_%s %q begins with ~, and there is no home directory to put in its place (%v): write the full path", prefix, name, *p, err)
			}
			*p = filepath.Join(h, strings.TrimPrefix(*p, "~"))
		}
		if *p != "" && !filepath.IsAbs(*p) {
			return fmt.Errorf("%s_%s %q is a relative path, which each command would find from the folder it runs in (/ for a service): give an absolute path (~/ is expanded)", prefix, name, *p)
		}
	}
	return nil
}
