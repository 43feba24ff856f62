package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/session"
)

// sharedSID is the session id most corpus cases share; each case gets its
// own id here so that the cases stay separate sessions. (v1 files derive
// entry ids from the session id; none of them uses this one.)
const sharedSID = "0195a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// published is what the tailer puts in the stream for a file: complete
// lines from the header on, headers and entries only (pi drops the rest
// anyway, except id-less scalar values), each distinct line once.
func published(data []byte) []byte {
	lines := bytes.Split(data, []byte{'\n'})
	lines = lines[:len(lines)-1] // the partial last line, or "" after the final '\n'
	var out bytes.Buffer
	seen := map[[32]byte]bool{}
	started := false
	for _, raw := range lines {
		l := session.ParseLine(raw)
		if !started {
			if l.Kind == session.Header && l.HasID {
				started = true
			} else if l.Kind.Kept() {
				return nil // the tailer ignores the file
			} else {
				continue
			}
		}
		if l.Kind != session.Header && l.Kind != session.Entry {
			continue
		}
		sha := sha256.Sum256(raw)
		if seen[sha] {
			continue
		}
		seen[sha] = true
		out.Write(raw)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// TestConformance runs every corpus file through the tailer and the
// worker: the context from the projection (bodies read back from the
// stream) must equal session.Load(file).Context(), for every case that
// loads. Where the tailer's publication rules change what pi would read
// (scalar pseudo-entries are never published, a line identical to an
// earlier one is stored once, a final line without '\n' waits for it),
// the reference is Load of what was published, and the difference is
// logged.
func TestConformance(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no corpus files")
	}
	root := t.TempDir()
	type tc struct {
		name, sid, want string
		list            *listInfo // pi's list of the file, nil where it drops it
	}
	var cases []tc
	for i, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		sid := fmt.Sprintf("conf-%03d", i)
		data = bytes.ReplaceAll(data, []byte(sharedSID), []byte(sid))
		full, err := session.Load(data)
		if err != nil {
			continue // pi would not load it: nothing to compare
		}
		sid = full.Tree.SessionID()
		pub := published(data)
		if pub == nil {
			continue
		}
		want := fileContext(t, pub)
		if fc := fileContext(t, data); fc != want {
			t.Logf("%s: the stream holds what the tailer publishes, which pi reads differently from the file:\n file      %.300s\n published %.300s", name, fc, want)
		}
		cases = append(cases, tc{name, sid, want, expectedList(t, path, sid)})
		writeFile(t, filepath.Join(root, "--conf--", fmt.Sprintf("2026-01-01T00-00-00-000Z_%03d.jsonl", i)), data)
	}
	n := startNode(t, root, t.TempDir())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n.t = t
			if c.want == "error" {
				waitFor(t, 30*time.Second, func() (bool, string) {
					got := n.contextJSON(c.sid)
					return strings.HasPrefix(got, "error: projection: context: session:"), got
				})
				return
			}
			n.waitContext(c.sid, c.want)
			if c.list != nil {
				n.waitListFields(c.sid, *c.list)
			}
		})
	}
	n.t = t
	// Restarted on the same bucket: the first messages, which the bucket
	// does not hold, are read back from the streams.
	n.stopWorker()
	n.startWorker()
	for _, c := range cases {
		if c.list != nil {
			t.Run(c.name+"/restarted", func(t *testing.T) {
				n.t = t
				n.waitListFields(c.sid, *c.list)
			})
		}
	}
	n.t = t
	if len(cases) < 40 {
		t.Errorf("only %d corpus cases compared", len(cases))
	}
}

// listInfo is what pi's session list (the corpus's "list" result) says
// of the fields the catalog shares with it.
type listInfo struct {
	FirstMessage      string `json:"firstMessage"`
	ParentSessionPath any    `json:"parentSessionPath"`
	SameAs            string `json:"sameAs"` // the result is that pi version's
}

// expectedList reads the seed rules' list result of a corpus file, with
// the case's session id; nil where pi's list leaves the file out.
func expectedList(t *testing.T, path, sid string) *listInfo {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(path, ".jsonl") + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte(sharedSID), []byte(sid))
	var exp struct {
		Results map[string]struct {
			List *listInfo `json:"list"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	l := exp.Results["seed"].List
	for i := 0; l != nil && l.SameAs != "" && i < len(exp.Results); i++ {
		l = exp.Results[l.SameAs].List
	}
	return l
}

// waitListFields waits until the catalog entry of sid has pi's first
// message (cut to session.FirstMessageMax; "(no messages)" is "") and
// parent session.
func (n *node) waitListFields(sid string, l listInfo) {
	n.t.Helper()
	first := l.FirstMessage
	if first == "(no messages)" {
		first = ""
	}
	first = session.CutUTF8(first, session.FirstMessageMax)
	parent, _ := l.ParentSessionPath.(string)
	waitFor(n.t, 30*time.Second, func() (bool, string) {
		c, ok := n.catalogEntry(sid)
		ok = ok && c.FirstMessage == first && c.ParentSession == parent && c.Forked == (parent != "")
		return ok, fmt.Sprintf("catalog first %q parent %q forked %v, pi's list: %q %q", c.FirstMessage, c.ParentSession, c.Forked, first, parent)
	})
}
