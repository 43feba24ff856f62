package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A machine's positions on the hub (the downloader's hub sequence, the
// forwarder's PI_LOCAL position, which says what the hub holds) are only
// true of the PI_HUB they were taken on. A hub whose store was replaced
// (rebuilt empty, restored from an older backup, a node moved to another
// team's account) numbers its messages afresh: the downloader resumed
// after a sequence the new stream had not reached, and copied nothing
// until it did, the first messages never; the forwarder sent only new
// lines, so the new hub never held the team's history. Each keeps the
// identity of the PI_HUB it works on, its creation time (kept by the
// server across restarts), and starts over when it changes.
//
// A store put back from a copy of its own files (a backup restored) keeps
// that creation time, and numbers from the copy's last message: the
// downloader resumed past the messages written since under sequences it
// had taken already, and never copied them; the forwarder never sent
// again the lines the copy did not hold. So each also keeps a mark, the
// last message it took from or gave to PI_HUB (hubMark), and starts over
// when PI_HUB no longer holds that line at that sequence (rewound).

// Keys of the state bucket: the identity of the PI_HUB the forwarder and
// the downloader last worked on.
const (
	forwarderHubKey  = "forwarder.hub"
	downloaderHubKey = "downloader.hub"
)

// hubID is the identity of the hub's PI_HUB: its creation time.
func hubID(ctx context.Context, hub jetstream.JetStream) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := hub.Stream(ctx, HubStream)
	if err != nil {
		return "", fmt.Errorf("hub %s info: %w", HubStream, err)
	}
	return s.CachedInfo().Created.UTC().Format(time.RFC3339Nano), nil
}

// hubChanged reports whether the hub's PI_HUB is another than the one key
// records, and the identity to record once the caller has started over
// (recordHub). A first look (nothing recorded: a new machine, or one that
// ran before identities were kept) is no change.
func hubChanged(ctx context.Context, state jetstream.KeyValue, key string, hub jetstream.JetStream) (changed bool, id, was string, err error) {
	if id, err = hubID(ctx, hub); err != nil {
		return false, "", "", err
	}
	e, err := state.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, id, "", recordHub(ctx, state, key, id)
	case err != nil:
		return false, "", "", fmt.Errorf("hub identity: %w", err)
	}
	was = string(e.Value())
	return was != id, id, was, nil
}

// recordHub records id as the PI_HUB worked on.
func recordHub(ctx context.Context, state jetstream.KeyValue, key, id string) error {
	if _, err := state.Put(ctx, key, []byte(id)); err != nil {
		return fmt.Errorf("hub identity: %w", err)
	}
	return nil
}

// rebuiltKey is the state key of the PI_ALL sequence up to which PI_ALL's
// messages were copied from a PI_HUB since replaced: their Pi-Hub-Seq
// numbers another stream, and lines the new one holds again (its
// forwarders send their history anew) are passed over by their position
// at their origin (All.lastSrc).
const rebuiltKey = "downloader.rebuilt"

// checkHub starts the copy over when the hub's PI_HUB is not the one the
// copy was made from: from the new stream's start, every line PI_ALL
// holds already passed over.
func (d *Downloader) checkHub(ctx context.Context) error {
	if d.opts.State == nil {
		return nil
	}
	changed, id, was, err := hubChanged(ctx, d.opts.State, downloaderHubKey, d.hub)
	if err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	why := "its creation time is another"
	if !changed {
		_, mark, err := d.position(ctx)
		if err != nil {
			return err
		}
		if why, err = rewound(ctx, d.hub, mark); err != nil {
			// As passStatusLike: a hub that cannot be asked (an older
			// one) is copied from as it was.
			d.logger.Debug("downloader: could not look for a hub store restored from a copy", "err", err)
			return nil
		}
		if why == "" {
			return nil
		}
	}
	info, err := d.all.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("downloader: %s: %w", AllStream, err)
	}
	// Recorded in this order, a crash between the writes is redone at
	// the next start: nothing is copied before the identity is recorded.
	last := strconv.FormatUint(info.State.LastSeq, 10)
	if _, err := d.opts.State.Put(ctx, rebuiltKey, []byte(last)); err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	if _, err := d.opts.State.Put(ctx, skipKey, []byte("0")); err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	if d.opts.Crypt != nil {
		d.opts.Crypt.NewHub()
	}
	if err := dropParked(ctx, d.local); err != nil {
		return err
	}
	if err := recordHub(ctx, d.opts.State, downloaderHubKey, id); err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	d.logger.Warn("the hub's store is not the one this machine copied from (rebuilt, restored from a backup, or another team's): copying from its start again, passing over what this machine holds",
		"why", why, "hub_stream_created", id, "copied_from_stream_created", was, "pi_all_seq", info.State.LastSeq)
	return nil
}

// rebuiltAt reads rebuiltKey: 0 when the copy was never started over.
func (d *Downloader) rebuiltAt(ctx context.Context) (uint64, error) {
	if d.opts.State == nil {
		return 0, nil
	}
	e, err := d.opts.State.Get(ctx, rebuiltKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("downloader: %w", err)
	}
	n, err := strconv.ParseUint(string(e.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("downloader: %s %q: %w", rebuiltKey, e.Value(), err)
	}
	return n, nil
}

// checkHub for the forwarder: a PI_HUB that is not the one its position
// was taken on gets every line PI_LOCAL holds again (the hub subject's own
// position, read per session, skips what it holds).
func (f *Forwarder) checkHub(ctx context.Context) error {
	changed, id, was, err := hubChanged(ctx, f.state, forwarderHubKey, f.hub)
	if err != nil {
		return err
	}
	if was == "" {
		return f.checkOwnLines(ctx)
	}
	why := "its creation time is another"
	if !changed {
		if why, err = f.rewound(ctx); err != nil {
			f.logger.Debug("forwarder: could not look for a hub store restored from a copy", "err", err)
			return nil
		}
		if why == "" {
			return nil
		}
	}
	if _, err := f.state.Put(ctx, forwarderKey, []byte("0")); err != nil {
		return fmt.Errorf("forwarder position: %w", err)
	}
	if err := f.state.Delete(ctx, forwarderMarkKey); err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	f.mark, f.markSaved = hubMark{}, hubMark{}
	clear(f.up)
	if f.crypt != nil {
		f.crypt.NewHub()
	}
	if err := recordHub(ctx, f.state, forwarderHubKey, id); err != nil {
		return err
	}
	f.logger.Warn("the hub's store is not the one this machine forwarded to (rebuilt, restored from a backup, or another team's): forwarding every line this machine holds again",
		"why", why, "hub_stream_created", id, "forwarded_to_stream_created", was)
	return nil
}

// checkOwnLines looks, at this state's first contact with the hub, for
// lines the hub holds of this node that this state never forwarded: the
// node id is another machine's too (a reinstalled machine with a new state
// dir, or two machines set to one id). The hub's per-session positions
// are then not this store's: a line of a session the other store wrote is
// taken for one the hub holds (its PI_LOCAL position is lower) and never
// forwarded, and the replicator writes no line of this node's here, so the
// first machine's sessions do not come back. Said once, with the fix; the
// daemon goes on (new sessions are forwarded), as it does when the hub
// cannot be asked.
func (f *Forwarder) checkOwnLines(ctx context.Context) error {
	if _, err := f.state.Get(ctx, forwarderKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil // this state forwarded before the identity was kept (an upgrade), or cannot say
	}
	m, err := hubNext(ctx, f.hub, HubStream, 1, UpPrefix+"."+f.local.Node+".>")
	if err != nil {
		// Only a warning to give: forwarding goes on without it.
		f.logger.Debug("forwarder: could not look for lines of this node id on the hub", "err", err)
		return nil
	}
	if m == nil {
		return nil
	}
	subj, seq := m.Subject, m.Sequence
	f.logger.Error("the hub holds lines of this node id that this machine never forwarded: another machine runs or ran as "+f.local.Node+
		" (a reinstall with a new state dir, or two machines set to one id); that machine's sessions are not written here, and lines of its sessions written here are not forwarded",
		"node", f.local.Node, "first_hub_seq", seq, "subject", subj,
		"hint", "give this machine an id of its own: pisyncd hub add-node NEW-ID, then PISYNC_NODE_ID=NEW-ID with a new state dir (the old id's sessions then arrive as another node's)")
	return nil
}
