package web

import (
	"time"

	"github.com/pisyncd/pisyncd/projection"
)

// Snapshots are kept for the pages that follow the one they were read for.
// Image requests come in bursts right after a page is rendered, and a
// reload, a branch switch or the next window of a branch asks for the same
// session again: reading a 10k-entry session from the streams and parsing
// every entry for the tree took most of a page's 150 ms. A kept snapshot
// serves them while the catalog says the session has not moved past it
// (each stream's last applied sequence at or below what the snapshot read);
// the page follows live entries from the snapshot's own position, so an
// entry the catalog has not applied yet still reaches it. An entry's line
// never changes, so a kept snapshot that holds the entry serves its images
// as well as a fresh one.

const snapCache = 2

type cachedSnap struct {
	sid  string
	snap *projection.Snapshot
	// rows and usage are the tree panel and the tokens by model computed
	// from snap, once (nil until then).
	rows  []treeRow
	usage []modelUsage
}

// flight is a read of a session under way (Server.read).
type flight struct {
	done    chan struct{} // closed when snap or err is set
	snap    *projection.Snapshot
	err     error
	waiting int // other requests waiting for it (under Server.mu; TestPageAndTreeShareOneRead waits on it)
}

// keep puts c first (replacing the session's older entry); s.mu is held.
// The kept snapshots go once none was used for KeepFor: each may hold
// 64 MiB of lines and a tree of its entries, and kept for the daemon's
// life they set the collector to work without rest on an idle daemon
// (two big sessions viewed once: 95 MB of a 484 MB live heap, above the
// memory limit, and a third of a core in collections).
func (s *Server) keep(c cachedSnap) {
	s.resetForget()
	s.snaps = append([]cachedSnap{c}, s.snaps...)
	for i := 1; i < len(s.snaps); i++ {
		if s.snaps[i].sid == c.sid {
			s.snaps = append(s.snaps[:i], s.snaps[i+1:]...)
			break
		}
	}
	if len(s.snaps) > snapCache {
		s.snaps = s.snaps[:snapCache]
	}
}

// forgetSnaps drops the kept snapshots (keep's timer).
func (s *Server) forgetSnaps() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps, s.images = nil, nil
}

// resetForget has the kept snapshots and images go KeepFor from now; s.mu
// is held.
func (s *Server) resetForget() {
	if s.forget == nil {
		s.forget = time.AfterFunc(s.opts.KeepFor, s.forgetSnaps)
	} else {
		s.forget.Reset(s.opts.KeepFor)
	}
}

// current returns the kept snapshot of sid when the catalog entry c shows
// nothing applied past it, or nil.
func (s *Server) current(c projection.CatalogEntry) *projection.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.snaps {
		if k.sid != c.SessionID {
			continue
		}
		for _, e := range c.Src {
			if e.Seq > k.snap.Src[e.Stream] {
				return nil
			}
		}
		s.keep(k)
		return k.snap
	}
	return nil
}

// treeAndUsage returns the tree rows and usage of snap, computed once per
// kept snapshot.
func (s *Server) treeAndUsage(sid string, snap *projection.Snapshot) ([]treeRow, []modelUsage) {
	s.mu.Lock()
	for _, k := range s.snaps {
		if k.sid == sid && k.snap == snap && k.rows != nil {
			s.mu.Unlock()
			return k.rows, k.usage
		}
	}
	s.mu.Unlock()
	ls := lines(snap)
	rows, usage := tree(snap, ls), usage(ls)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.snaps {
		if s.snaps[i].sid == sid && s.snaps[i].snap == snap {
			s.snaps[i].rows, s.snaps[i].usage = rows, usage
		}
	}
	return rows, usage
}

// recall returns a cached snapshot of sid that holds entry id, or nil. A
// snapshot read before the session was erased is not one: the session may
// be back with entries of the same ids (a copy kept elsewhere), and the
// erased images were served from it (a probe, 2026-12-07).
func (s *Server) recall(sid, id string) *projection.Snapshot {
	below := s.opts.Source.ErasedBelow(sid)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.snaps {
		if c.sid != sid {
			continue
		}
		if i, ok := c.snap.Tree.Find(id); ok {
			ref := c.snap.Tree.Entry(i).Ref
			if stream, seq := projection.Position(ref); seq <= below[stream] {
				continue // the erased session's line
			}
			if _, ok := c.snap.Line(ref); ok {
				return c.snap
			}
		}
	}
	return nil
}
