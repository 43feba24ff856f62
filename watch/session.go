package watch

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Log is what the tailer needs from the event log (eventlog.Local).
type Log interface {
	Last(ctx context.Context, sid string) (uint64, *eventlog.Event, error)
	First(ctx context.Context, sid string) (*eventlog.Event, error)
	Scan(ctx context.Context, sid string, upTo uint64, withData bool, fn func(*eventlog.Event) error) error
	Publish(ctx context.Context, sid string, last uint64, lines []eventlog.Line) (uint64, int, error)
	PublishGroups(ctx context.Context, groups []eventlog.Group) ([]uint64, error)
	// Held is the sessions whose subject holds a message.
	Held(ctx context.Context) (map[string]struct{}, error)
}

var _ Log = (*eventlog.Local)(nil)

// sessionLog is what the tailer knows of one session's subject. Several files
// can carry one session id (pi's /export keeps it), so a session is shared by
// files and guarded by its own mutex.
type sessionLog struct {
	mu  sync.Mutex
	sid string
	// known holds the sha-256 of every line stored on the subject; nil until
	// loaded, which happens the first time a file of the session has a line
	// to publish. An unchanged file never needs it.
	known map[[32]byte]struct{}
	// ids maps entry id to the first hash seen for it, to report entries
	// that two different lines claim (a collision or a rewrite).
	ids map[string][32]byte
	// rewritten: the session's header was stored again with other bytes:
	// pi migrated the file (a newer version, written in place), and the
	// entries it rewrote with their ids are no collision.
	rewritten bool
	last      uint64 // subject sequence of the last stored message
	// used is when known was last needed: dropKnown lets go of it after
	// knownIdle.
	used time.Time
}

// load reads the subject's stored lines (headers only).
func (s *sessionLog) load(ctx context.Context, log Log, extra func(context.Context, string, func([32]byte)) error, empty bool) (collisions int, err error) {
	var last uint64
	if !empty {
		if last, _, err = log.Last(ctx, s.sid); err != nil {
			return 0, err
		}
	}
	s.known, s.ids, s.rewritten = make(map[[32]byte]struct{}), make(map[string][32]byte), false
	defer func() {
		if err != nil {
			// Loaded whole or not at all: a nil known is "not loaded", and
			// one left half full would pass lines it lacks for stored.
			s.known, s.ids = nil, nil
		}
	}()
	if last > 0 {
		err = log.Scan(ctx, s.sid, last, false, func(ev *eventlog.Event) error {
			if s.record(ev.Sha, ev.ID, ev.Type) {
				collisions++
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("watch: load session %s: %w", s.sid, err)
		}
	}
	if extra != nil {
		if err := extra(ctx, s.sid, func(sha [32]byte) { s.known[sha] = struct{}{} }); err != nil {
			return 0, fmt.Errorf("watch: load session %s: %w", s.sid, err)
		}
	}
	s.last = last
	return collisions, nil
}

// add records a stored line; it reports whether its entry id was already
// held by a different line.
func (s *sessionLog) add(l *eventlog.Line) (collision bool) {
	return s.record(l.Sha, l.ID, l.Type)
}

// record records a stored line by its hash, entry id and type; it reports
// whether the id was held by a different line, a header's and the
// entries pi rewrote in a migration apart (they were counted as
// collisions, which status shows as a fault: a files probe, 2026-12-07).
func (s *sessionLog) record(sha [32]byte, id, typ string) (collision bool) {
	s.known[sha] = struct{}{}
	if id == "" {
		return false
	}
	prev, ok := s.ids[id]
	if !ok {
		s.ids[id] = sha
		return false
	}
	if prev == sha {
		return false
	}
	if typ == "session" {
		s.rewritten = true
		return false
	}
	return !s.rewritten
}
