package replicate

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// PathMap translates absolute paths of other machines into this machine's:
// "/Users/ann/src=/home/ann/src,/Users/ann=/home/ann". The longest matching
// prefix wins; a prefix matches whole path segments only.
type PathMap struct {
	rules []rule
}

type rule struct{ from, to string }

// ParsePathMap reads the PISYNC_PATH_MAP syntax: comma-separated FROM=TO
// pairs of absolute paths.
func ParsePathMap(s string) (PathMap, error) {
	var m PathMap
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		from, to = strings.TrimSpace(from), strings.TrimSpace(to)
		if !ok || !isAbs(from) || !isAbs(to) {
			return PathMap{}, fmt.Errorf("path map %q: want FROM=TO with absolute paths", pair)
		}
		r := rule{clean(from), clean(to)}
		if i := slices.IndexFunc(m.rules, func(o rule) bool { return o.from == r.from }); i >= 0 {
			if m.rules[i].to == r.to {
				continue
			}
			// Which one won would depend on the order of the list.
			return PathMap{}, fmt.Errorf("path map: %s is mapped twice, to %s and to %s: keep one of them", r.from, m.rules[i].to, r.to)
		}
		m.rules = append(m.rules, r)
	}
	sort.SliceStable(m.rules, func(i, j int) bool { return len(m.rules[i].from) > len(m.rules[j].from) })
	return m, nil
}

func isAbs(p string) bool {
	return strings.HasPrefix(p, "/") || (len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/'))
}

func clean(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return strings.TrimRight(p, `\/`)
}

// Map returns p translated by the first matching rule, or p unchanged.
func (m PathMap) Map(p string) string {
	for _, r := range m.rules {
		if p == r.from {
			return r.to
		}
		if r.from == "/" && strings.HasPrefix(p, "/") {
			return path.Join(r.to, p[1:])
		}
		if strings.HasPrefix(p, r.from) && (p[len(r.from)] == '/' || p[len(r.from)] == '\\') {
			return r.to + p[len(r.from):]
		}
	}
	return p
}

// Empty reports whether there are no rules.
func (m PathMap) Empty() bool { return len(m.rules) == 0 }
