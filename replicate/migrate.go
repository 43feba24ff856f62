package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// pi migrates a version 1 or 2 session file in place when it opens it:
// it rewrites the whole file with a version 3 header and new random entry
// ids. Its tailer then publishes the rewritten lines, so the other
// machines see the same node's version 3 header after the old one. Left
// alone, a copy would hold the old lines and the renumbered ones (pi
// computes another context there), and a second machine's pi would
// migrate its copy again, with other random ids. So the first migration
// in hub order wins, on every machine alike: a copy still in the old
// format is replaced by the winner's lines (the old file goes to the
// trash), and the lines of any later migration of the same session, by
// another machine's pi, are kept in the event log but never written.

// migration is the recorded outcome for one session.
type migration struct {
	Winner string   `json:"winner"`
	Losers []string `json:"losers,omitempty"`
	loaded bool
}

func migrationKey(sid string) string {
	h := sha256.Sum256([]byte(sid))
	return "replicator.migrated." + hex.EncodeToString(h[:16])
}

// loadMigration reads the session's record once per run.
func (r *Replicator) loadMigration(ctx context.Context, s *sess) error {
	if s.migration.loaded {
		return nil
	}
	e, err := r.state.Get(ctx, migrationKey(s.sid))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return fmt.Errorf("replicator: read migration record of %s: %w", s.sid, err)
	default:
		if err := json.Unmarshal(e.Value(), &s.migration); err != nil {
			return fmt.Errorf("replicator: migration record of %s: %w", s.sid, err)
		}
	}
	s.migration.loaded = true
	return nil
}

func (r *Replicator) saveMigration(ctx context.Context, s *sess) error {
	b, _ := json.Marshal(s.migration)
	if _, err := r.state.Put(ctx, migrationKey(s.sid), b); err != nil {
		return fmt.Errorf("replicator: record migration of %s: %w", s.sid, err)
	}
	return nil
}

// header takes a session header event of any node, own ones included, in
// hub order, and decides whether it is a migration and whose wins.
func (r *Replicator) header(ctx context.Context, s *sess, ev *eventlog.Event) error {
	if v := session.ParseLine(ev.Raw).Version; v < 3 {
		s.oldHeader, s.oldVersion = true, v
		return nil
	}
	if err := r.loadMigration(ctx, s); err != nil {
		return err
	}
	m := &s.migration
	switch {
	case m.Winner == ev.Node:
		// Applied again after a restart: finish a replacement that a
		// crash may have cut short.
		if ev.Node != r.opts.Node {
			if v, ok := r.localVersion(s); !ok || v >= 3 {
				return nil
			}
			return r.replaceWith(s, ev)
		}
		return nil
	case m.Winner != "":
		if !slices.Contains(m.Losers, ev.Node) {
			m.Losers = append(m.Losers, ev.Node)
			r.logger.Warn("a second machine migrated an old session: the first migration stays, its lines are not written here",
				"session", s.sid, "winner", m.Winner, "node", ev.Node)
			return r.saveMigration(ctx, s)
		}
		return nil
	}
	// The old form: its header read before this one, else (read from a
	// later position after a restart) this machine's file.
	v, old := s.oldVersion, s.oldHeader
	if !old {
		lv, ok := r.localVersion(s)
		v, old = lv, ok && lv < 3
	}
	if !old {
		return nil // an ordinary version 3 header
	}
	if v >= 2 { // from 2 up to 3: pi's migration keeps the ids
		// pi's migration of a version 2 file keeps every id and changes
		// only the header and hookMessage roles, the same bytes on every
		// machine: its tailer publishes those lines alone, the others
		// being held already. Replacing the copy here with them would
		// leave it a header without its entries (a probe on 2026-12-06).
		// The copy stays in version 2, which pi reads as the same
		// session, and the other machine's new lines follow it; pi
		// migrates it alike when it opens it here. No winner: a second
		// machine's migration is the same, and its lines are written.
		return nil
	}
	m.Winner = ev.Node
	if err := r.saveMigration(ctx, s); err != nil {
		return err
	}
	r.migrated.Add(1)
	if ev.Node == r.opts.Node {
		return nil // pi migrated the file here: it holds the winner's lines
	}
	return r.replaceWith(s, ev)
}

// localVersion reads the version of this machine's file of the session;
// ok is false when it has none, or none that can be opened. A file here
// that cannot be opened (a link in its place, its mode) is no old version
// to replace: returning the error stopped the replicator at the header,
// every session with it and at every restart, while status said nothing
// (a probe, 2026-12-07: one session file linked from outside the sessions
// dir, and no other machine's line was written here again). Writing into
// it meets the same error, for this session alone: a link's quarantines
// it, another is retried (flushOne).
func (r *Replicator) localVersion(s *sess) (v float64, ok bool) {
	if s.file == nil {
		if err := r.locate(s); err != nil {
			r.logger.Debug("replicator: this machine's file of a session cannot be opened; taken as no old version", "session", s.sid, "err", err)
			return 0, false
		}
	}
	if s.file == nil {
		return 0, false
	}
	return firstHeaderVersion(s.file.path)
}

// replaceWith moves this machine's old-format file to the trash and makes
// ev, the winning migration's header, the session's header: the next
// write round creates the file anew with it and the migrated lines that
// follow. Lines still waiting from before the migration are dropped: the
// migrated file holds them, renumbered.
func (r *Replicator) replaceWith(s *sess, ev *eventlog.Event) error {
	r.dropQueue(s)
	if s.file == nil {
		if err := r.locate(s); err != nil {
			return err
		}
	}
	if s.file != nil {
		path := s.file.path
		undo := r.tracker.Forget(path)
		dst, err := r.moveToTrash(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			undo()
			return fmt.Errorf("replicator: replace %s migrated on %s: %w", path, ev.Node, err)
		}
		r.dropFile(s)
		r.logger.Info("old session migrated on another machine: replacing the copy here", "session", s.sid,
			"node", ev.Node, "old_copy", dst)
	}
	s.header, s.oldHeader = ev, false
	return nil
}

// lostMigration reports whether ev is a line of a machine whose migration
// of the session came second: its lines carry other ids for the same
// entries and are never written.
func (s *sess) lostMigration(ev *eventlog.Event) bool {
	return ev.Op == "" && slices.Contains(s.migration.Losers, ev.Node)
}

// firstHeaderVersion reads the version of a file's header line.
func firstHeaderVersion(path string) (float64, bool) {
	f, _, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	l, ok := readHeader(f)
	return l.Version, ok
}
