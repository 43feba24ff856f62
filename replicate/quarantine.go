package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// A session whose file can never be written safely (a link in its file's
// place, a folder behind a link, a cwd PISYNC_PATH_MAP does not map) is
// quarantined: its lines are dropped as they come, and status lists it.
// The cause is often mended by hand, but a restart forgot the quarantine
// and never wrote what had been dropped: the file stayed short until its
// origin wrote again, and for good once the session was over (a probe,
// 2026-12-07). So the quarantine is recorded in the state bucket (its
// value the session id), and each run starts by reading the recorded
// sessions' lines up to the saved position again: written when the path
// is sound now (the record then goes), quarantined again when it is not.
// Past maxQuarantineRecords, a quarantine is not recorded: a node cannot
// make every restart read without bound.
const (
	quarantinePrefix     = "replicator.quarantined."
	maxQuarantineRecords = 100
)

func quarantineKey(sid string) string { return SessionKey(quarantinePrefix, sid) }

// quarantine stops writing a session here: its queued and later lines
// are counted as rejected, status lists it, and the state bucket records
// it for the next run.
func (r *Replicator) quarantine(ctx context.Context, s *sess, err error) {
	r.rejected.Add(int64(len(s.queue)))
	r.dropQueue(s)
	s.quarantined = err.Error()
	r.mu.Lock()
	if len(r.quarantined) < maxListed {
		r.quarantined[s.sid] = s.quarantined
	}
	r.mu.Unlock()
	if !s.recorded && r.recordedQuarantines() < maxQuarantineRecords {
		v, _ := json.Marshal(s.sid)
		if _, perr := r.state.Put(ctx, quarantineKey(s.sid), v); perr != nil {
			r.logger.Debug("replicator: a quarantine not recorded; a restart does not try the session again", "session", s.sid, "err", perr)
		} else {
			s.recorded = true
		}
	}
	r.logger.Warn("a session from another machine cannot be written here; quarantined", "session", s.sid, "err", err,
		"hint", "mend what the error names (a link where the session's file or folder should be: put the file or folder itself there; an absolute cwd too long here or another system's: map it with PISYNC_PATH_MAP), then restart pisyncd: the session's lines are written then; a cwd that is missing, empty, not a string or not absolute was not written by pi, and only the session's writer can mend it")
}

// loadQuarantined queues again the lines, up to the saved position, of the
// sessions recorded as quarantined: the writes try their paths anew.
// Called at the start of a run, after loadHeaderless.
func (r *Replicator) loadQuarantined(ctx context.Context) error {
	sids, err := r.recordedSessions(ctx, quarantinePrefix, quarantineKey)
	if err != nil {
		return fmt.Errorf("replicator: read the quarantined sessions: %w", err)
	}
	for _, sid := range sids {
		s := r.session(sid)
		s.recorded = true
		if r.headerless[sid] {
			continue // its lines are queued already
		}
		if err := r.reapply(ctx, sid); err != nil {
			return fmt.Errorf("replicator: read the lines of %s, quarantined before: %w", sid, err)
		}
		if len(s.queue) == 0 {
			r.lifted(ctx, s) // nothing of another machine's to write
		}
	}
	return nil
}

// lifted removes the record of session s, recorded as quarantined, once
// everything queued for it was written.
func (r *Replicator) lifted(ctx context.Context, s *sess) {
	if err := r.unrecord(ctx, s); err != nil {
		r.logger.Debug("replicator: the record of a quarantine not removed; the next start tries the session again", "session", s.sid, "err", err)
		return
	}
	r.logger.Info("a session quarantined before is written here again", "session", s.sid)
}

// dropQuarantine forgets the quarantine of session s, which is erased: its
// record, and its row in status (which named the erased session's cause
// until a restart).
func (r *Replicator) dropQuarantine(ctx context.Context, s *sess) error {
	r.mu.Lock()
	delete(r.quarantined, s.sid)
	r.mu.Unlock()
	return r.unrecord(ctx, s)
}

// unrecord removes the record of s's quarantine, if it has one.
func (r *Replicator) unrecord(ctx context.Context, s *sess) error {
	if !s.recorded {
		return nil
	}
	if err := r.state.Delete(ctx, quarantineKey(s.sid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	s.recorded = false
	return nil
}

// recordedQuarantines counts the quarantines recorded: every recorded
// session is held (loadQuarantined makes each one, and sweep keeps them).
func (r *Replicator) recordedQuarantines() int {
	n := 0
	for _, s := range r.sessions {
		if s.recorded {
			n++
		}
	}
	return n
}
