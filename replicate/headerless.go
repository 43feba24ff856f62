package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Lines of a session whose header has not come wait: no file can be made
// for them without it. Hub order puts a session's header first, but a
// header held for a key this machine lacks (PI_PARK), trimmed from the hub,
// or never sent (a broken or hostile node: one line is enough) leaves them
// waiting, for ever in the last case. While they waited, the replicator's
// saved position stayed before the first of them, so every restart read
// PI_ALL again from there: after a month, a month of every session.
//
// Instead, such a session is recorded in the state bucket (its key holds
// the session id) and its waiting lines no longer hold the position back;
// each run starts by reading the recorded sessions' lines up to the saved
// position again (a read of those sessions' subjects alone), so they wait
// in memory as they did before the restart. The record goes once the
// session has a file here and nothing waits, or is deleted or erased.
// Past maxHeaderless records, a session's lines hold the position as
// before: a node cannot make this machine keep records without bound.
const (
	headerlessPrefix = "replicator.headerless."
	maxHeaderless    = 1000
)

func headerlessKey(sid string) string { return SessionKey(headerlessPrefix, sid) }

// loadHeaderless reads the recorded sessions and their lines up to the
// saved position (r.startPos) into memory. Called at the start of a run,
// with r.sessions empty.
func (r *Replicator) loadHeaderless(ctx context.Context) error {
	r.headerless = map[string]bool{}
	sids, err := r.recordedSessions(ctx, headerlessPrefix, headerlessKey)
	if err != nil {
		return fmt.Errorf("replicator: read the sessions waiting for a header: %w", err)
	}
	for _, sid := range sids {
		r.headerless[sid] = true
	}
	r.headerlessN.Store(int64(len(r.headerless)))
	for _, sid := range sids {
		if err := r.reapply(ctx, sid); err != nil {
			return fmt.Errorf("replicator: read the lines of %s, which wait for its header: %w", sid, err)
		}
	}
	return nil
}

// recordedSessions reads the sessions recorded in the state bucket under
// prefix: each under keyOf(its id), its value the id in JSON (a value
// under another key than its id's is passed over).
func (r *Replicator) recordedSessions(ctx context.Context, prefix string, keyOf func(string) string) ([]string, error) {
	var sids []string
	err := readKeys(ctx, r.state, prefix, func(k string, v []byte) {
		var sid string
		if json.Unmarshal(v, &sid) == nil && keyOf(sid) == k {
			sids = append(sids, sid)
		}
	})
	return sids, err
}

// reapply applies the lines of session sid up to the saved position
// (r.startPos) again, so that they wait in memory as they did before the
// restart; its control events were applied when first read.
func (r *Replicator) reapply(ctx context.Context, sid string) error {
	return r.all.ScanSessionRange(ctx, sid, 0, r.startPos, true, func(ev *eventlog.Event) error {
		if ev.Op != "" {
			return nil
		}
		return r.apply(ctx, ev)
	})
}

// setAside reports whether the lines waiting in s may be left out of the
// position: s has no header and no file here, and is recorded (now, if it
// was not).
func (r *Replicator) setAside(ctx context.Context, s *sess) bool {
	if len(s.queue) == 0 || s.header != nil || s.file != nil || s.deleted || s.trashAfter != nil {
		return false
	}
	if r.headerless[s.sid] {
		return true
	}
	if len(r.headerless) >= maxHeaderless {
		if !r.headerlessFull {
			r.headerlessFull = true
			r.logger.Warn("more sessions wait for their header than are recorded; the lines of the rest hold the replicator's position, and a restart reads PI_ALL again from there",
				"recorded", maxHeaderless, "session", s.sid)
		}
		return false
	}
	v, _ := json.Marshal(s.sid)
	if _, err := r.state.Put(ctx, headerlessKey(s.sid), v); err != nil {
		r.logger.Debug("replicator: a session waiting for its header not recorded; its lines hold the position", "session", s.sid, "err", err)
		return false
	}
	r.headerless[s.sid] = true
	r.headerlessN.Store(int64(len(r.headerless)))
	return true
}

// settleHeaderless drops the records of sessions that wait no more: their
// lines written (or passed over), or the session deleted or erased here.
// Called once what was written is durable.
func (r *Replicator) settleHeaderless(ctx context.Context) error {
	for sid := range r.headerless {
		if s := r.sessions[sid]; s != nil && len(s.queue) > 0 && !s.deleted {
			continue
		}
		if err := r.dropHeaderless(ctx, sid); err != nil {
			return err
		}
	}
	return nil
}

// dropHeaderless deletes sid's record.
func (r *Replicator) dropHeaderless(ctx context.Context, sid string) error {
	if !r.headerless[sid] {
		return nil
	}
	if err := r.state.Delete(ctx, headerlessKey(sid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("replicator: %s: %w", sid, err)
	}
	delete(r.headerless, sid)
	r.headerlessN.Store(int64(len(r.headerless)))
	return nil
}

// readKeys calls fn with each key under prefix in kv and its value: the
// state bucket's records of one kind.
func readKeys(ctx context.Context, kv jetstream.KeyValue, prefix string, fn func(key string, value []byte)) error {
	keys, err := kv.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return err
	}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			keys.Stop()
			return err
		}
		fn(k, e.Value())
	}
	return nil
}
