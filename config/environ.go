package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// process reads the variables of prefix into spec: each field from
// PREFIX_NAME (NAME its envconfig tag), else from its default tag. It does
// not use envconfig.Process, which reads a field from the bare NAME when
// PREFIX_NAME is unset: STATE_DIR, NODE_ID or HTTP_ADDR set for another
// program became this daemon's (its store moved, its node renamed, its web
// view on the other program's port), and LOG_LEVEL=verbose was refused as
// a PISYNC_LOG_LEVEL nobody had set.
// A variable set to nothing but spaces counts as unset, as an empty line
// of a service's environment file means: PISYNC_SEARCH= turned search off,
// and PISYNC_LOG_LEVEL= was refused. A field tagged empty:"keep" takes the
// empty value (PISYNC_HUB_LISTEN=: no client listener). A value it cannot
// convert is named with what it should look like.
func process(prefix string, spec any) error {
	v := reflect.ValueOf(spec).Elem()
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		name := sf.Tag.Get("envconfig")
		if name == "" {
			continue
		}
		key := prefix + "_" + name
		value, ok := os.LookupEnv(key)
		if !ok || (strings.TrimSpace(value) == "" && sf.Tag.Get("empty") != "keep") {
			def, has := sf.Tag.Lookup("default")
			if !has {
				continue
			}
			value = def
		}
		f := v.Field(i)
		if err := setField(f, value); err != nil {
			for _, tooLarge := range []error{errSizeTooLarge, errIntTooLarge} {
				if errors.Is(err, tooLarge) {
					// Well formed: "want a size such as 64MiB" read as a typo.
					return fmt.Errorf("%s %q: %w", key, value, tooLarge)
				}
			}
			return fmt.Errorf("%s %q: want %s", key, value, wantOf(f))
		}
	}
	return nil
}

// errIntTooLarge is a whole number past what its setting can hold.
var errIntTooLarge = errors.New("too large a number")

// setField converts value into f, for the kinds of field Config and Hub
// have, as envconfig does.
func setField(f reflect.Value, value string) error {
	if d, ok := f.Addr().Interface().(envconfig.Decoder); ok {
		return d.Decode(value)
	}
	if f.Kind() != reflect.String && f.Kind() != reflect.Slice {
		// A number, a duration or a flag, as sizes are: " 8" (an env
		// file's space) was refused, "64MiB " taken (a probe). A
		// string's spaces may be its own (a path).
		value = strings.TrimSpace(value)
	}
	if f.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(value)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(value)
	case reflect.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int:
		// Base 10 only: with base 0, "010" was 8 and "0x10" 16, where a
		// user writing a count means ten.
		n, err := strconv.ParseInt(value, 10, f.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			return errIntTooLarge
		}
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Slice:
		if f.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported field type %s", f.Type())
		}
		f.Set(reflect.ValueOf(strings.Split(value, ",")))
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}

// wantOf says what a value of f's kind looks like.
func wantOf(f reflect.Value) string {
	switch {
	case f.Type() == reflect.TypeFor[time.Duration]():
		return "a duration with its unit, such as 500ms, 10s or 2m"
	case f.Type() == reflect.TypeFor[ByteSize]():
		return "a size such as 512KiB, 64MiB or 2GiB"
	case f.Kind() == reflect.Bool:
		return "true or false"
	case f.Kind() == reflect.Int:
		return "a whole number"
	}
	return f.Type().String()
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
		warns = append(warns, w+" (`pisyncd help` lists the daemon's settings, `pisyncd hub help` the hub's)")
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
