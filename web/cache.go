package web

import "github.com/pisyncd/pisyncd/projection"

// Image requests come in bursts right after a page is rendered: they
// reuse the snapshot that page was rendered from rather than read the
// session again. An entry's line never changes, so a cached snapshot that
// holds the entry serves its images as well as a fresh one.

const snapCache = 2

type cachedSnap struct {
	sid  string
	snap *projection.Snapshot
}

func (s *Server) remember(sid string, snap *projection.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps = append([]cachedSnap{{sid, snap}}, s.snaps...)
	for i := 1; i < len(s.snaps); i++ {
		if s.snaps[i].sid == sid {
			s.snaps = append(s.snaps[:i], s.snaps[i+1:]...)
			break
		}
	}
	if len(s.snaps) > snapCache {
		s.snaps = s.snaps[:snapCache]
	}
}

// recall returns a cached snapshot of sid that holds entry id, or nil.
func (s *Server) recall(sid, id string) *projection.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.snaps {
		if c.sid != sid {
			continue
		}
		if i, ok := c.snap.Tree.Find(id); ok {
			if _, ok := c.snap.Line(c.snap.Tree.Entry(i).Ref); ok {
				return c.snap
			}
		}
	}
	return nil
}
