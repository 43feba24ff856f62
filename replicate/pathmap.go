package replicate

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// PathMap translates absolute paths of other machines into this machine's:
// "/Users/ann/src=/home/ann/src,/Users/ann=/home/ann". The longest matching
// prefix wins; a prefix matches whole path segments only.
type PathMap struct {
	rules []rule
}

type rule struct{ from, to string }

// ParsePathMap reads the PISYNC_PATH_MAP syntax: comma-separated FROM=TO
// pairs of absolute paths. A path may not hold a comma or an '=' (the
// syntax has no escape), a control character (it would name a folder no
// remote cwd may: admission refuses them there) or a ".." (which
// prefix a rule with one matches would depend on how it is read).
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
			return PathMap{}, fmt.Errorf("path map %q: want FROM=TO, both absolute paths (/Users/ann=/home/ann), pairs separated by commas; a path cannot hold a comma", pair)
		}
		for _, p := range []string{from, to} {
			if err := mappable(p); err != nil {
				return PathMap{}, fmt.Errorf("path map %q: %s %w", pair, strconv.Quote(p), err)
			}
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

// mappable refuses what a path of a rule may not hold (ParsePathMap).
func mappable(p string) error {
	if strings.ContainsRune(p, '=') {
		return errors.New("holds an '=': a rule is FROM=TO, one '=' between two paths that hold none")
	}
	if i := strings.IndexFunc(p, unicode.IsControl); i >= 0 {
		return fmt.Errorf("holds a control character (%U): a path map's paths are printable", []rune(p[i:])[0])
	}
	for seg := range strings.FieldsFuncSeq(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return errors.New(`holds "..": write the path it leads to`)
		}
	}
	return nil
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

// Map returns p translated by the first matching rule, or p unchanged. An
// absolute path is matched as pi resolves it ("//Users/ann/./p" is
// /Users/ann/p), and mapped resolved.
func (m PathMap) Map(p string) string {
	q := p
	if strings.HasPrefix(q, "/") {
		q = path.Clean(q)
	}
	for _, r := range m.rules {
		var rest string
		switch {
		case q == r.from:
		case r.from == "/" && strings.HasPrefix(q, "/"):
			rest = q
		case strings.HasPrefix(q, r.from) && (q[len(r.from)] == '/' || q[len(r.from)] == '\\' && !strings.HasPrefix(r.from, "/")):
			// '\' parts the names of another system's paths ("C:\x"),
			// not of a POSIX path, where it is a character of a name.
			rest = q[len(r.from):]
		default:
			continue
		}
		if strings.HasPrefix(r.to, "/") {
			if !strings.HasPrefix(r.from, "/") {
				rest = strings.ReplaceAll(rest, `\`, "/") // C:\Users\ann\p to /home/ann/p
			}
			// Joined, not appended: a rule to "/" made "//proj" of
			// /m1/proj, whose folder pi does not list.
			return path.Join(r.to, rest)
		}
		return r.to + rest
	}
	return p
}

// MapFolder returns the name here of pi's project folder of another
// machine (CwdFolder of a cwd there): the folder of the cwd mapped, read
// from the folder's name alone. A name is what pi made of a path, '/' and
// '-' alike as '-', so a rule matches a folder whose name starts with the
// rule's path so made, whole names or not (a rule of /a/b maps the folder
// of /a/b-c too): only a parentSession of a fork in another project
// folder goes through it, which without it named a folder of the other
// machine's, never here. A name that is no project folder, or that no rule
// matches, is returned as it is.
func (m PathMap) MapFolder(folder string) string {
	inner, ok := folderInner(folder)
	if !ok {
		return folder
	}
	for _, r := range m.rules {
		from, _ := folderInner(CwdFolder(r.from))
		to, _ := folderInner(CwdFolder(r.to))
		var rest string
		switch {
		case inner == from:
		case from == "": // a rule of "/"
			rest = "-" + inner
		case strings.HasPrefix(inner, from+"-"):
			rest = inner[len(from):]
		default:
			continue
		}
		if to == "" { // a rule to "/"
			rest = strings.TrimPrefix(rest, "-")
		}
		return "--" + to + rest + "--"
	}
	return folder
}

// isFolderName reports whether name is one pi gives a project folder.
func isFolderName(name string) bool {
	_, ok := folderInner(name)
	return ok
}

// folderInner is a project folder's name between its "--" and "--".
func folderInner(folder string) (string, bool) {
	if len(folder) < 4 || !strings.HasPrefix(folder, "--") || !strings.HasSuffix(folder, "--") {
		return "", false
	}
	return folder[2 : len(folder)-2], true
}

// Empty reports whether there are no rules.
func (m PathMap) Empty() bool { return len(m.rules) == 0 }
