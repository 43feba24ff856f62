//go:build docker

package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/replicate"
)

// Hand-written pi lines (format v3), as pi appends them; entries carry the
// time they are written.
func hdrLine(sid, cwd string) string { return testenv.HeaderAt(sid, cwd, "2026-11-30T00:00:00.000Z") }

func msgLine(id, parent, text string) string {
	return testenv.EntryAt(id, parent, time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), text)
}

// sessionPath is where pi keeps session sid begun in cwd, under root.
func sessionPath(root, cwd, sid string) string {
	return filepath.Join(root, replicate.CwdFolder(cwd), "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
}

func appendLines(path string, lines ...string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	// One write per call: O_APPEND keeps it whole next to the replicator's.
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	return errors.Join(err, f.Close())
}

// findSession returns the file under root (hidden folders such as the trash
// left out) whose name ends in _<sid>.jsonl, and its lines.
func findSession(root, sid string) (string, []string) {
	var path string
	filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.IsDir() && p != root && strings.HasPrefix(de.Name(), ".") {
			return filepath.SkipDir
		}
		if !de.IsDir() && strings.HasSuffix(de.Name(), "_"+sid+".jsonl") {
			path = p
		}
		return nil
	})
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return path, nil
	}
	return path, splitLines(string(b))
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func isHeader(line string) bool { return strings.Contains(line, `"type":"session"`) }

func lineHash(line string) string {
	h := sha256.Sum256([]byte(line))
	return hex.EncodeToString(h[:8])
}

// ledger records every entry line written anywhere, per session: what every
// workstation's file must hold, exactly once.
type ledger struct {
	mu       sync.Mutex
	sessions map[string]map[string]bool // sid -> line hashes (headers left out)
	local    map[string]int             // workstation -> lines written there (headers included)
}

func newLedger() *ledger {
	return &ledger{sessions: map[string]map[string]bool{}, local: map[string]int{}}
}

// append writes lines to path on workstation ws and records them.
func (l *ledger) append(t *testing.T, ws, sid, path string, lines ...string) {
	if err := appendLines(path, lines...); err != nil {
		t.Errorf("%s: append: %v", ws, err)
		return
	}
	l.record(ws, sid, lines...)
}

func (l *ledger) record(ws, sid string, lines ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.sessions[sid]
	if set == nil {
		set = map[string]bool{}
		l.sessions[sid] = set
	}
	for _, line := range lines {
		l.local[ws]++
		if !isHeader(line) {
			set[lineHash(line)] = true
		}
	}
}

func (l *ledger) entries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, set := range l.sessions {
		n += len(set)
	}
	return n
}

// check is the invariant: every session's file on every workstation holds
// exactly the recorded entries, each once, and a header.
func (l *ledger) check(s *stack) (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sids := make([]string, 0, len(l.sessions))
	for sid := range l.sessions {
		sids = append(sids, sid)
	}
	sort.Strings(sids)
	for _, ws := range stations {
		for _, sid := range sids {
			want := l.sessions[sid]
			path, lines := findSession(s.sessions(ws), sid)
			if path == "" {
				return false, fmt.Sprintf("%s: no file for session %s", ws, sid)
			}
			seen := map[string]int{}
			headers := 0
			for _, line := range lines {
				if isHeader(line) {
					headers++
					continue
				}
				seen[lineHash(line)]++
			}
			if headers != 1 {
				return false, fmt.Sprintf("%s: %s has %d headers", ws, path, headers)
			}
			missing, extra := 0, 0
			for h := range want {
				if seen[h] == 0 {
					missing++
				}
			}
			for h, n := range seen {
				if !want[h] {
					extra++
				}
				if n > 1 {
					return false, fmt.Sprintf("%s: %s holds a line %d times (FAIL: duplicate)", ws, path, n)
				}
			}
			if missing > 0 || extra > 0 {
				return false, fmt.Sprintf("%s: session %s: %d of %d entries missing, %d unknown", ws, sid, missing, len(want), extra)
			}
		}
	}
	return true, ""
}

// checkPublishedOnce checks that each workstation's PI_LOCAL holds exactly
// the lines written there: nothing lost, nothing published twice, and no
// replicated line published again as local.
func (l *ledger) checkPublishedOnce(s *stack) (bool, string) {
	l.mu.Lock()
	want := map[string]int{}
	for ws, n := range l.local {
		want[ws] = n
	}
	l.mu.Unlock()
	for _, ws := range stations {
		st, err := s.status(ws)
		if err != nil {
			return false, err.Error()
		}
		if st.Stream.Messages != uint64(want[ws]) {
			return false, fmt.Sprintf("%s: PI_LOCAL holds %d events, %d lines were written there", ws, st.Stream.Messages, want[ws])
		}
		if st.Tailer.Collisions != 0 || (st.Replicator != nil && st.Replicator.EntryCollisions != 0) {
			return false, fmt.Sprintf("%s: entry id collisions %+v", ws, st)
		}
	}
	return true, ""
}

// waitFile waits for a file on a workstation and returns its lines.
func waitFile(t *testing.T, path string, n int, timeout time.Duration) []string {
	t.Helper()
	var lines []string
	waitFor(t, timeout, func() (bool, string) {
		b, err := os.ReadFile(path)
		lines = splitLines(string(b))
		return err == nil && len(lines) >= n, fmt.Sprintf("%s: %d of %d lines (%v)", path, len(lines), n, err)
	})
	return lines
}
