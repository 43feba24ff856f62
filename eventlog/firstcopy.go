package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// A state dir made afresh on a machine whose sessions dir holds copies of
// other machines' sessions (a reinstall, or a node re-added under a new
// id) has an empty PI_ALL: the tailer, which tells the lines the
// replicator wrote here by PI_ALL (replicate's KnownLines), took every
// such line for one written here, and published the other machines'
// sessions as this node's. The hub then held them twice, the other
// machines counted a fork of each, and the new node had the authority of
// a writer over them: its erase removed them everywhere (found by a probe
// on 2026-12-06). So a state that has published nothing reads its sessions
// only once the downloader has copied what the hub holds (FirstCopy).

// firstCopyKey is the state key set once the downloader has copied
// everything the hub held: from then on PI_ALL knows the other machines'
// lines, whatever the hub's state at later starts.
const firstCopyKey = "downloader.firstcopy"

// firstCopyOwedKey is the state key set when a start found it must wait
// for the first copy: the next start waits too, whatever the files' times
// are by then (the user's work in them meanwhile made them newer than the
// store, and a restart published every copy: a probe on 2026-12-06).
const firstCopyOwedKey = "downloader.firstcopy.owed"

// OweFirstCopy records that the session files wait for the first copy.
func (d *Downloader) OweFirstCopy(ctx context.Context) error {
	return d.stateSet(ctx, firstCopyOwedKey)
}

// stateSet puts key in the state bucket (nothing without one).
func (d *Downloader) stateSet(ctx context.Context, key string) error {
	if d.opts.State == nil {
		return nil
	}
	if _, err := d.opts.State.Put(ctx, key, []byte("1")); err != nil {
		return fmt.Errorf("downloader: first copy: %w", err)
	}
	return nil
}

// FirstCopyOwed reports whether an earlier start found that the session
// files wait for the first copy (OweFirstCopy).
func (d *Downloader) FirstCopyOwed(ctx context.Context) (bool, error) {
	return d.stateHas(ctx, firstCopyOwedKey)
}

// stateHas reports whether the state bucket holds key (false without one).
func (d *Downloader) stateHas(ctx context.Context, key string) (bool, error) {
	if d.opts.State == nil {
		return false, nil
	}
	_, err := d.opts.State.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("downloader: first copy: %w", err)
	}
	return true, nil
}

// firstCopy is closed once the downloader has had nothing more to copy.
type firstCopy struct {
	once sync.Once
	done chan struct{}
	// ended: the hub had nothing more, but lines were held for a team key
	// this machine lacks: the copy is complete once they are released.
	// Without it, the tailer took such a copy of an encrypted session for
	// this machine's and published it, in clear without a key (a probe on
	// 2026-12-06).
	ended atomic.Bool
}

// FirstCopyDone reports whether a downloader of this state has copied
// everything the hub held, at this start or an earlier one.
func (d *Downloader) FirstCopyDone(ctx context.Context) (bool, error) {
	select {
	case <-d.first.done:
		return true, nil
	default:
	}
	return d.stateHas(ctx, firstCopyKey)
}

// FirstCopy returns a channel closed once the downloader, at this start,
// has had nothing more to copy from the hub: every line of other
// machines' the hub held is in PI_ALL, or was passed over.
func (d *Downloader) FirstCopy() <-chan struct{} { return d.first.done }

// copiedAll records that the downloader had nothing more to copy: PI_ALL
// holds what the hub held. Called from either stage of a copy; the
// record is written once.
func (d *Downloader) copiedAll(ctx context.Context) {
	if d.held.Load() > 0 {
		d.first.ended.Store(true)
		return
	}
	d.first.once.Do(func() {
		if err := d.stateSet(ctx, firstCopyKey); err != nil {
			// The next start waits for a copy again: no harm.
			d.logger.Debug("downloader: could not record the first copy", "err", err)
		}
		close(d.first.done)
	})
}

// firstCopyDue reports whether the first copy is complete now, as the
// frame stage sees it when the hub is silent: not recorded yet, no line
// held for a key, and either the hub had nothing more before (held lines
// since released), or the consumer cons has delivered nothing (received
// says whether it has) and has nothing to deliver: a hub without other
// machines' lines, or none since the last copy.
func (d *Downloader) firstCopyDue(ctx context.Context, cons jetstream.Consumer, received bool) bool {
	select {
	case <-d.first.done:
		return false
	default:
	}
	if d.held.Load() > 0 {
		return false
	}
	if d.first.ended.Load() {
		return true
	}
	if received {
		return false
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return false
	}
	return info.NumPending == 0 && info.Delivered.Consumer == 0
}
