package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/kelseyhightower/envconfig"
)

// process reads the variables of prefix into spec (envconfig), and says
// what a value it cannot convert should look like, naming the variable
// and the value: envconfig's own words name the Go field and type.
func process(prefix string, spec any) error {
	err := envconfig.Process(prefix, spec)
	var pe *envconfig.ParseError
	if !errors.As(err, &pe) {
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		return nil
	}
	if errors.Is(pe.Err, errSizeTooLarge) {
		// Well formed: "want a size such as 64MiB" read as a typo.
		return fmt.Errorf("%s %q: %w", pe.KeyName, pe.Value, errSizeTooLarge)
	}
	want := pe.TypeName
	switch pe.TypeName {
	case "time.Duration":
		want = "a duration with its unit, such as 500ms, 10s or 2m"
	case "config.ByteSize":
		want = "a size such as 512KiB, 64MiB or 2GiB"
	case "bool":
		want = "true or false"
	case "int":
		want = "a whole number"
	}
	return fmt.Errorf("%s %q: want %s", pe.KeyName, pe.Value, want)
}

// Unknown returns a warning for every variable of environ (KEY=value
// lines, as os.Environ gives them) named PISYNC_* that neither the
// daemon nor the hub reads: a misspelt setting is otherwise left at its
// default without a word. Where a setting's name is close (two edits, an
// underscore not counted), the warning names it.
func Unknown(environ []string) []string {
	known := settingNames()
	var warns []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, Prefix+"_") || slices.Contains(known, name) {
			continue
		}
		w := fmt.Sprintf("%s is set, but pisyncd has no such setting: it is ignored", name)
		if near := nearest(name, known); near != "" {
			w += fmt.Sprintf("; did you mean %s?", near)
		}
		warns = append(warns, w+" (pisyncd help lists every setting)")
	}
	slices.Sort(warns)
	return warns
}

// settingNames lists the variables of the daemon and of the hub: one
// shell may hold both, and a workstation reads some PISYNC_HUB_* too.
func settingNames() []string {
	var names []string
	for prefix, spec := range map[string]any{Prefix: Config{}, HubPrefix: Hub{}} {
		t := reflect.TypeOf(spec)
		for i := range t.NumField() {
			if tag := t.Field(i).Tag.Get("envconfig"); tag != "" {
				names = append(names, prefix+"_"+tag)
			}
		}
	}
	return names
}

// nearest returns the name among known closest to name, if at most two
// edits away once underscores are dropped (PISYNC_LOGLEVEL is LOG_LEVEL).
func nearest(name string, known []string) string {
	squash := func(s string) string { return strings.ReplaceAll(strings.TrimPrefix(s, Prefix+"_"), "_", "") }
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(squash(name), squash(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, byte-wise
// (variable names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
