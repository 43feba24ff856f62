package replicate

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// ErrUnsafe marks a write that would go outside the sessions root or
// under a name pi could not have made: a remote event's cwd or session id,
// or a path here (a link in a file's or a folder's place). It is reported
// and the event is not written. Its text names no cause: a link put here
// by hand was reported as "unsafe path in a remote event".
var ErrUnsafe = errors.New("replicate: unsafe path")

// CwdFolder is pi's per-project folder name for a cwd (spec §1): one
// leading separator dropped, every '/', '\' and ':' replaced by '-', wrapped
// in "--". The result never contains a separator. pi names the folder after
// the cwd resolved (path.resolve): "/a/b/../c/", "//a/c" and "/a/./c" are
// /a/c's folder there, and a copy put anywhere else would not be listed
// by pi here. A path that does not begin with '/' (another system's,
// "C:\x") loses its trailing separators and a leading '\'.
func CwdFolder(cwd string) string {
	if strings.HasPrefix(cwd, "/") {
		cwd = path.Clean(cwd)[1:]
	} else {
		cwd = strings.TrimRight(cwd, `/\`)
		if cwd != "" && cwd[0] == '\\' {
			cwd = cwd[1:]
		}
	}
	r := strings.NewReplacer("/", "-", `\`, "-", ":", "-")
	return "--" + r.Replace(cwd) + "--"
}

// sessionIDPattern is what pi accepts as a chosen session id (spec §1).
// The patterns here are compiled on first use, not at init: every command
// would pay for them at start (`context FILE` among them, issue 11).
var sessionIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`) })

// fileNamePattern is a name pisyncd is willing to create: what pi makes, or
// what /import keeps, without separators, hidden names or control bytes.
var fileNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,250}\.jsonl$`) })

// timestampName turns an ISO timestamp into pi's file-name prefix.
func timestampName(ts string) string {
	return strings.NewReplacer(":", "-", ".", "-").Replace(ts)
}

var isoPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,3})?Z$`) })

// target is where a remote session lands here: root/folder/name.
func target(root, cwd, originFile, sid, timestamp string) (string, error) {
	if strings.ContainsRune(cwd, 0) || len(cwd) > 4096 || !isAbs(cwd) {
		return "", fmt.Errorf("%w: cwd %q", ErrUnsafe, cwd)
	}
	folder := CwdFolder(cwd)
	if len(folder) > 255 || folder == "." || folder == ".." {
		return "", fmt.Errorf("%w: cwd %q makes folder %q", ErrUnsafe, cwd, folder)
	}
	name := filepath.Base(filepath.FromSlash(originFile))
	// A name without the session's id is not taken: pi names every file
	// after its session, and a node that named its session after another
	// one's file (in that one's folder) had it show here as its fork,
	// "<name>-1.jsonl", beside it.
	if originFile == "" || !fileNamePattern().MatchString(name) || !namedFor(name, sid) {
		if !sessionIDPattern().MatchString(sid) {
			return "", fmt.Errorf("%w: session id %q makes no file name", ErrUnsafe, sid)
		}
		name = sid + ".jsonl"
		if isoPattern().MatchString(timestamp) {
			name = timestampName(timestamp) + "_" + name
		}
		if !fileNamePattern().MatchString(name) {
			return "", fmt.Errorf("%w: file name %q", ErrUnsafe, name)
		}
	}
	p := filepath.Join(root, folder, name)
	if err := inside(root, p); err != nil {
		return "", err
	}
	return p, nil
}

// namedFor reports whether file name is one of session sid's: sid, or
// ending in "_" and sid (pi's "<timestamp>_<id>"), before ".jsonl" and a
// collision's "-N". The id merely inside the name is not enough: a short
// id ("2026") is inside every name pi makes.
func namedFor(name, sid string) bool {
	base := strings.TrimSuffix(name, ".jsonl")
	if i := strings.LastIndexByte(base, '-'); i > 0 && isDigits(base[i+1:]) && !strings.HasSuffix(base, sid) {
		base = base[:i]
	}
	return base == sid || strings.HasSuffix(base, "_"+sid)
}

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// inside checks, lexically, that p lies strictly below root.
func inside(root, p string) error {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return fmt.Errorf("%w: %s is outside %s", ErrUnsafe, p, root)
	}
	return nil
}
