package projection

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// sessionState is what the worker holds for one session: the catalog entry
// (always), the tree (only while loaded: see Worker.ensureTree) and what
// was last written, so unchanged values are not written again.
type sessionState struct {
	mu      sync.Mutex
	sid     string
	cat     CatalogEntry // Src is the per-stream applied sequence
	tree    *session.Tree
	err     error      // the tree's load error, if pi would reject the file
	lastUse uint64     // LRU clock of the tree
	bodies  *bodyCache // the last context's bodies, nil for none
	kept    *treeKept  // nil while no tree is loaded
	// written is the hash of each value last written (content without
	// Src, so a page rewritten only for its Src is not rewritten).
	written writtenHashes
	// erased: dropped on an erase event; a follower that still holds it
	// writes nothing for it.
	erased bool
	// parentRead: the header's parentSession was read into the catalog
	// (once a process: a catalog written by an older version lacks it).
	parentRead bool
	// listed: the catalog entry was filled from the tree (or read from the
	// bucket), so Catalog lists it. A session first seen while views are
	// held back (Options.WriteAfter) has events applied but no entry yet.
	listed bool
	// headerRemote: the tree's header came from PI_ALL, another
	// machine's, whose cwd is mapped here (Options.MapCwd); cwdRead: the
	// catalog's cwd was read from the header (once a process).
	headerRemote, cwdRead bool
}

// treeKept is what a session keeps beside its loaded tree and drops with
// it: where the tree's own lines sit in this machine's files (locs.go), and
// what each context page was last hashed from (build.go). It is apart from
// sessionState so that the thousands of sessions without a tree in memory
// do not each carry its empty fields (168 bytes: sessionState went from
// the 768-byte size class to the 576-byte one).
type treeKept struct {
	locs  lineLocs
	pages []pageMemo
	// early are lines that came before any header (appendLine), and
	// earlyBytes their size.
	early      []*eventlog.Event
	earlyBytes int
}

// A session begun elsewhere and continued here has its header in PI_ALL
// and this machine's lines in PI_LOCAL, which the worker reads at once:
// this machine's may come first. Fed to the tree then, they made it take
// the session for none of pi's (a file whose first line is no header),
// for good. They wait for the header instead, up to earlyMax lines and
// earlyMaxBytes; past that (a session whose header never comes) they go to
// the tree, which says what pi would.
const (
	earlyMax      = 4096
	earlyMaxBytes = 16 << 20
)

// keep returns what is kept beside the tree, made when missing.
func (s *sessionState) keep() *treeKept {
	if s.kept == nil {
		s.kept = &treeKept{}
	}
	return s.kept
}

func newSessionState(sid string) *sessionState {
	return &sessionState{
		sid: sid,
		cat: CatalogEntry{SessionID: sid, Nodes: []string{}},
	}
}

// applied reports whether the event is already in the views.
func (s *sessionState) applied(ev *eventlog.Event) bool { return ev.Seq <= s.cat.Src.Get(ev.Stream) }

// apply adds one event to the tree (loaded by the caller) and the catalog.
// The event's strings are substrings of its message's subject and header
// block (nats.go copies the block once): what the entry keeps is a copy
// (nm's, shared by every session, for its node and stream), or one session
// held on to a whole message's headers.
//
// A line the tree holds already (same, the same id and bytes from another
// node) is counted for its node and file but not added again.
func (s *sessionState) apply(ev *eventlog.Event, nm *names, same bool) {
	c := &s.cat
	c.Src.set(ev.Stream, ev.Seq, nm)
	node := ev.Node
	if i := slices.Index(c.Nodes, node); i >= 0 {
		node = c.Nodes[i]
	} else {
		node = nm.get(node)
		c.Nodes = append(c.Nodes, node)
		slices.Sort(c.Nodes)
	}
	if ev.File != "" {
		c.File = c.Files.set(node, ev.File)
	}
	if ev.Op == eventlog.OpDelete {
		if !slices.Contains(c.DeletedOn, node) {
			c.DeletedOn = append(c.DeletedOn, node)
			slices.Sort(c.DeletedOn)
		}
		c.Deleted = len(c.DeletedOn) == len(c.Nodes)
		return
	}
	if ev.Op != "" && ev.Op != eventlog.OpRestore {
		return // a control event this version does not know
	}
	if i := slices.Index(c.DeletedOn, ev.Node); i >= 0 {
		// The node restored the session, or writes it again: its file
		// is back.
		c.DeletedOn = slices.Delete(c.DeletedOn, i, i+1)
		c.Deleted = false
	}
	if ev.Op == eventlog.OpRestore {
		c.Deleted = len(c.DeletedOn) == len(c.Nodes) // the node may be new to the session
		return
	}
	if same {
		return
	}
	s.feed(ev, node)
	if n := s.tree.Len(); n > 0 {
		if ts := s.tree.Entry(n - 1).Timestamp; !math.IsNaN(ts) && ts > c.UpdatedMs {
			c.UpdatedMs, c.Updated = ts, isoMs(ts)
		}
	}
}

// feed adds a line to the tree, following pi's in-place migration of an
// old session: a version 3 header after a version 1 one (the file pi
// rewrote when it opened it, with new ids, published again by that
// machine) restarts the tree from it, since what came before is the same
// conversation with other ids. A later migration of the same session by
// another node loses, as in the files: its lines are left out. pi's
// migration of a version 2 file keeps every id, and only the lines it
// changed (the header, hookMessage roles) are published again: the tree
// keeps its lines, which it reads as pi reads the migrated ones, and
// passes over those of ids it holds. node is the entry's copy of ev.Node,
// which is a substring of the event's message.
func (s *sessionState) feed(ev *eventlog.Event, node string) {
	c := &s.cat
	if slices.Contains(c.MigrationLosers, ev.Node) {
		return
	}
	keepsIDs := s.tree.MigrationKeepsIDs()
	if c.MigratedBy != "" && keepsIDs {
		// A version 2 session migrated: its changed lines come again.
		if l := session.ParseLine(ev.Raw); l.HasID {
			if _, held := s.tree.Find(l.ID); held {
				return
			}
		}
	}
	if ev.Type == "session" && s.tree.Header() != nil && session.ParseLine(ev.Raw).Version >= 3 {
		switch {
		case keepsIDs:
			if c.MigratedBy == "" {
				c.MigratedBy = node
			}
		case c.MigratedBy == "" && s.tree.Migrated():
			c.MigratedBy = node
			t := session.NewTree()
			t.SetRules(s.tree.RuleMode())
			s.tree, s.err = t, nil
		case c.MigratedBy != "" && c.MigratedBy != ev.Node:
			c.MigrationLosers = append(c.MigrationLosers, node)
			return
		}
	}
	s.appendLine(ev)
}

// appendLine feeds the tree; a rejected session keeps its first error. A
// line before any header waits for one (early).
func (s *sessionState) appendLine(ev *eventlog.Event) {
	l := session.ParseLine(session.ToValidUTF8(ev.Raw))
	k := s.keep()
	if s.tree.Header() == nil && s.err == nil && l.Kind.Kept() && l.Kind != session.Header &&
		len(k.early) < earlyMax && k.earlyBytes+len(ev.Raw) <= earlyMaxBytes {
		k.early = append(k.early, ev)
		k.earlyBytes += len(ev.Raw)
		return
	}
	s.appendParsed(ev, l)
	if l.Kind == session.Header && len(k.early) > 0 {
		early := k.early
		k.early, k.earlyBytes = nil, 0
		for _, e := range early {
			s.appendParsed(e, session.ParseLine(session.ToValidUTF8(e.Raw)))
		}
	}
}

// appendParsed feeds the tree one parsed line.
func (s *sessionState) appendParsed(ev *eventlog.Event, l session.Line) {
	had := s.tree.Header() != nil
	if err := s.tree.Append(l, makeRef(ev.Stream, ev.Seq)); err != nil && s.err == nil {
		s.err = err
	}
	if !had && s.tree.Header() != nil {
		// PI_ALL holds other machines' lines only (Options.Node).
		s.headerRemote = ev.Stream == eventlog.AllStream
	}
	s.keep().locs.add(ev)
}

// refreshCatalog copies what the tree knows into the catalog entry: the
// cwd as mapCwd makes it when the header came from another machine (and
// mapCwd is set).
func (s *sessionState) refreshCatalog(ctxView *ContextView, nm *names, mapCwd func(string) string) {
	c, t := &s.cat, s.tree
	s.listed = true
	c.Entries, c.Messages = t.Len(), t.MessageCount
	c.Tokens, c.Cost = t.TotalTokens, t.TotalCost
	c.Name = ""
	if name, ok, err := t.Name(); err == nil && ok {
		c.Name = session.ToWellFormed(name)
	}
	// Read from the header once a process (cwdRead), as its
	// parentSession is: a catalog entry written before its cwd was mapped
	// here gets it then.
	if !s.cwdRead && t.Header() != nil {
		s.cwdRead = true
		var h struct {
			Cwd       any `json:"cwd"`
			Timestamp any `json:"timestamp"`
		}
		json.Unmarshal(t.Header(), &h)
		cwd, _ := h.Cwd.(string)
		if s.headerRemote && mapCwd != nil && cwd != "" {
			cwd = mapCwd(cwd)
		}
		c.Cwd = nm.get(cwd)
		if ts, ok := h.Timestamp.(string); ok {
			c.Created = ts
			if tm, err := time.Parse(time.RFC3339Nano, ts); err == nil && c.UpdatedMs == 0 {
				c.UpdatedMs, c.Updated = float64(tm.UnixMilli()), ts
			}
		}
	}
	c.FirstMessage = t.FirstMessage()
	s.readParent(t.Header())
	c.Error = ""
	if s.err != nil {
		c.Error = s.err.Error()
	}
	c.LeafID, c.Model, c.Thinking, c.Rules = nil, nil, nil, ""
	if ctxView != nil {
		c.LeafID, c.Model, c.Thinking, c.Rules = ctxView.LeafID, ctxView.Model, ctxView.Thinking, ctxView.Rules
	}
}

// readParent sets the catalog's parent session from the header, once a
// process (a catalog written by a version without it gets it then); it
// reports whether the entry changed.
func (s *sessionState) readParent(header json.RawMessage) bool {
	if s.parentRead || header == nil {
		return false
	}
	p := parentSession(header)
	changed := p != s.cat.ParentSession
	s.cat.ParentSession, s.cat.Forked, s.parentRead = p, p != "", true
	return changed
}

// maxParentSession bounds the parent path kept (PATH_MAX): a hostile
// header does not make every catalog read carry a megabyte.
const maxParentSession = 4096

// parentSession is the header's parentSession when it is a non-empty
// string, well-formed and bounded; keys are matched exactly, the last of
// duplicates winning, as JSON.parse does.
func parentSession(header json.RawMessage) string {
	var h map[string]json.RawMessage
	if json.Unmarshal(header, &h) != nil {
		return ""
	}
	p, ok := session.JSString(h["parentSession"])
	if !ok {
		return ""
	}
	return strings.Clone(session.CutUTF8(session.ToWellFormed(p), maxParentSession))
}

func isoMs(ms float64) string {
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z")
}

func (s *sessionState) src() Src {
	return s.cat.Src.Src()
}
