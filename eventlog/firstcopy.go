package eventlog

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// firstCopy is closed once the downloader has had nothing more to copy.
type firstCopy struct {
	once sync.Once
	done chan struct{}
}

// FirstCopyDone reports whether a downloader of this state has copied
// everything the hub held, at this start or an earlier one.
func (d *Downloader) FirstCopyDone(ctx context.Context) (bool, error) {
	select {
	case <-d.first.done:
		return true, nil
	default:
	}
	if d.opts.State == nil {
		return false, nil
	}
	_, err := d.opts.State.Get(ctx, firstCopyKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("downloader: first copy: %w", err)
	}
	return true, nil
}

// FirstCopy returns a channel closed once the downloader, at this start,
// has had nothing more to copy from the hub: every line of other
// machines' the hub held is in PI_ALL, or was passed over.
func (d *Downloader) FirstCopy() <-chan struct{} { return d.first.done }

// copiedAll records that the downloader had nothing more to copy: PI_ALL
// holds what the hub held. Called from either stage of a copy; the
// record is written once.
func (d *Downloader) copiedAll(ctx context.Context) {
	d.first.once.Do(func() {
		if d.opts.State != nil {
			if _, err := d.opts.State.Put(ctx, firstCopyKey, []byte("1")); err != nil {
				// The next start waits for a copy again: no harm.
				d.logger.Debug("downloader: could not record the first copy", "err", err)
			}
		}
		close(d.first.done)
	})
}

// hubHadNothing reports whether the hub consumer cons has delivered
// nothing and has nothing to deliver: a copy that has received no message
// in a while is then caught up (a hub without other machines' lines, or
// none since the last copy). Asked until the first copy is recorded only.
func (d *Downloader) hubHadNothing(ctx context.Context, cons jetstream.Consumer) bool {
	select {
	case <-d.first.done:
		return false
	default:
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return false
	}
	return info.NumPending == 0 && info.Delivered.Consumer == 0
}
