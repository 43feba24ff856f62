package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StateBucket holds the read positions of the forwarder and the
// replicator. They are hints for where to start reading: the hub and the
// files are the truth, so a lost or stale position costs a re-check, never
// a duplicate.
const StateBucket = "pi_state"

// OpenState creates or opens the state bucket. An existing bucket is
// opened, not updated: an update rewrites its stream's meta files at every
// start, which a kill -9 can leave unreadable in an encrypted store
// (EnsureStream).
func OpenState(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	if kv, err := js.KeyValue(ctx, StateBucket); err == nil {
		return kv, nil
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("eventlog: state bucket: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "pisyncd: read positions of the forwarder and the replicator",
		Storage:     jetstream.FileStorage,
		History:     1,
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: state bucket: %w", err)
	}
	return kv, nil
}

// All is a workstation's PI_ALL: every node's events, copied from the hub.
type All struct {
	js      jetstream.JetStream
	stream  jetstream.Stream
	stored  hints  // see Stored
	suspect func() // see SetSuspect
}

// SetSuspect makes the downloader's writes into PI_ALL call suspect when
// they fail for no reason of their own, as Local.SetSuspect does for the
// tailer's. Call it before the downloader runs.
func (a *All) SetSuspect(suspect func()) { a.suspect = suspect }

// OpenAll makes sure PI_ALL exists. A PI_ALL left by an older pisyncd as a
// native mirror is replaced: it holds only derived data.
func OpenAll(ctx context.Context, js jetstream.JetStream) (*All, error) {
	if s, err := js.Stream(ctx, AllStream); err == nil && s.CachedInfo().Config.Mirror != nil {
		if err := js.DeleteStream(ctx, AllStream); err != nil {
			return nil, fmt.Errorf("eventlog: replace mirror %s: %w", AllStream, err)
		}
	}
	s, err := EnsureStream(ctx, js, AllStreamConfig())
	if err != nil {
		return nil, err
	}
	return newAll(js, s), nil
}

func newAll(js jetstream.JetStream, s jetstream.Stream) *All {
	return &All{js: js, stream: s, stored: newHints(AllStream, false)}
}

// ExistingAll is PI_ALL if this store has one (it was run with a hub),
// nil if it never had; unlike OpenAll it makes none.
func ExistingAll(ctx context.Context, js jetstream.JetStream) (*All, error) {
	s, err := js.Stream(ctx, AllStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: %s: %w", AllStream, err)
	}
	return newAll(js, s), nil
}

// ScanAllSession is ScanSession for a reader that did not open PI_ALL (a
// command on the store while no daemon runs): nothing when there is none,
// as on a machine that never had a hub.
func ScanAllSession(ctx context.Context, js jetstream.JetStream, sid string, withData bool, fn func(*Event) error) error {
	a, err := ExistingAll(ctx, js)
	if err != nil || a == nil {
		return err
	}
	return a.ScanSession(ctx, sid, withData, fn)
}

// Stored hands the messages the downloader has just stored in PI_ALL, in
// order, to one reader in this process (the replicator), so that a live
// line reaches the files without waiting for a consumer to deliver it
// (see hints).
func (a *All) Stored() <-chan []jetstream.Msg { return a.stored.c }

// Stream returns PI_ALL.
func (a *All) Stream() jetstream.Stream { return a.stream }

// JetStream returns the local JetStream context.
func (a *All) JetStream() jetstream.JetStream { return a.js }

// SessionFilter is the PI_ALL subject filter of one session on every node.
func SessionFilter(sid string) string { return AllPrefix + ".*." + EncodeSID(sid) }

// ScanSession calls fn for every event of the session in PI_ALL, from every
// node, in stream order, up to the stream's last sequence when called.
func (a *All) ScanSession(ctx context.Context, sid string, withData bool, fn func(*Event) error) error {
	info, err := a.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("eventlog: %s info: %w", AllStream, err)
	}
	if info.State.LastSeq == 0 {
		return nil
	}
	return ReadFiltered(ctx, a.js, AllStream, SessionFilter(sid), info.State.LastSeq, !withData, fn)
}

// ScanSessionRange calls fn for every event of the session in PI_ALL with a
// stream sequence from from (0 or 1: the start) up to upTo, in stream order.
// from is 0 or the sequence after an event of the session (an event's Seq is
// its line's last message, so a read from there begins a whole line).
func (a *All) ScanSessionRange(ctx context.Context, sid string, from, upTo uint64, withData bool, fn func(*Event) error) error {
	if upTo == 0 {
		return nil
	}
	return ReadFilteredFrom(ctx, a.js, AllStream, SessionFilter(sid), from, upTo, !withData, fn)
}

// PositionEvery is how often a worker writes its read position at most.
// Each write is an fsync of the state bucket; a write per line cost one of
// the few fsyncs a replicated line needs. A position a second old is only
// a longer re-check after a restart: the forwarder skips what the hub
// subjects already hold, the replicator what the files already hold.
const PositionEvery = time.Second

// Position keeps a worker's read position in the state bucket, written at
// most once per PositionEvery: Note records what is done, the worker calls
// Save when Due says so (it waits no longer than that for new messages),
// and once more, best effort, when it stops.
type Position struct {
	kv    jetstream.KeyValue
	key   string
	every time.Duration

	saved, done uint64
	at          time.Time // of the last write

	// OnSave, when set, runs after each write of the position: what
	// the worker keeps beside it, at the same pace.
	OnSave func(context.Context) error
}

// NewPosition keeps key in kv; saved is what it holds now.
func NewPosition(kv jetstream.KeyValue, key string, saved uint64) *Position {
	return &Position{kv: kv, key: key, every: PositionEvery, saved: saved, done: saved}
}

// Note records that everything up to done is handled and durable where it
// goes, and writes it if the last write is at least PositionEvery old.
func (p *Position) Note(ctx context.Context, done uint64) error {
	p.done = max(p.done, done)
	if time.Since(p.at) < p.every {
		return nil
	}
	return p.Save(ctx)
}

// Due returns how long until an unwritten position should be written, and
// false when everything noted is written.
func (p *Position) Due(now time.Time) (time.Duration, bool) {
	if p.done <= p.saved {
		return 0, false
	}
	return max(p.every-now.Sub(p.at), 0), true
}

// Save writes the noted position now, if it is not written yet.
func (p *Position) Save(ctx context.Context) error {
	if p.done <= p.saved {
		return nil
	}
	if _, err := p.kv.Put(ctx, p.key, []byte(strconv.FormatUint(p.done, 10))); err != nil {
		return fmt.Errorf("save position %s: %w", p.key, err)
	}
	p.saved, p.at = p.done, time.Now()
	if p.OnSave != nil {
		return p.OnSave(ctx)
	}
	return nil
}

// SaveOnStop writes what is noted after the worker's context ended: a
// restart then re-checks less. Best effort, bounded; the position is a
// hint, so a failure costs only that re-check.
func (p *Position) SaveOnStop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return p.Save(ctx)
}
