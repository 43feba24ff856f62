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
	ids  map[string][32]byte
	last uint64 // subject sequence of the last stored message
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
	known := make(map[[32]byte]struct{})
	ids := make(map[string][32]byte)
	if last > 0 {
		err = log.Scan(ctx, s.sid, last, false, func(ev *eventlog.Event) error {
			known[ev.Sha] = struct{}{}
			if ev.ID != "" {
				if prev, ok := ids[ev.ID]; !ok {
					ids[ev.ID] = ev.Sha
				} else if prev != ev.Sha {
					collisions++
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("watch: load session %s: %w", s.sid, err)
		}
	}
	if extra != nil {
		if err := extra(ctx, s.sid, func(sha [32]byte) { known[sha] = struct{}{} }); err != nil {
			return 0, fmt.Errorf("watch: load session %s: %w", s.sid, err)
		}
	}
	s.known, s.ids, s.last = known, ids, last
	return collisions, nil
}

// add records a stored line; it reports whether its entry id was already
// held by a different line.
func (s *sessionLog) add(l *eventlog.Line) (collision bool) {
	s.known[l.Sha] = struct{}{}
	if l.ID == "" {
		return false
	}
	if prev, ok := s.ids[l.ID]; ok {
		return prev != l.Sha
	}
	s.ids[l.ID] = l.Sha
	return false
}
