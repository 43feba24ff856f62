package projection

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// loadCatalog reads every catalog entry once (a KV watch delivers the
// current values, then a nil marker) and keeps them in memory: they carry
// the per-session applied sequences, and Catalog is served from them. It
// returns the sessions loaded, newest first.
func (w *Worker) loadCatalog(ctx context.Context) ([]*sessionState, error) {
	entries, err := ReadCatalog(ctx, w.kv)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	loaded := make([]*sessionState, 0, len(entries))
	for _, c := range entries {
		s := newSessionState(c.SessionID)
		w.names.share(&c)
		s.cat, s.listed = c, true
		if s.cat.Nodes == nil {
			s.cat.Nodes = []string{}
		}
		w.sessions[c.SessionID] = s
		loaded = append(loaded, s)
	}
	w.catDirty = true
	return loaded, nil
}

// ReadCatalog reads the catalog from the bucket, newest first. It is what
// Catalog serves, for a caller without a running worker, less the first
// messages, which the bucket does not hold (firstmessage.go).
func ReadCatalog(ctx context.Context, kv jetstream.KeyValue) ([]CatalogEntry, error) {
	wt, err := kv.WatchFiltered(ctx, []string{catalogFilter}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("projection: read catalog: %w", err)
	}
	defer wt.Stop()
	var out []CatalogEntry
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("projection: read catalog: %w", ctx.Err())
		case e, ok := <-wt.Updates():
			if !ok {
				return nil, errors.New("projection: read catalog: watch closed")
			}
			if e == nil {
				sortCatalog(out)
				return out, nil
			}
			var c CatalogEntry
			if err := json.Unmarshal(e.Value(), &c); err != nil {
				return nil, fmt.Errorf("projection: catalog entry %s: %w", e.Key(), err)
			}
			// A value written by a version that kept it there is not
			// shown either: the stream is its only source.
			c.FirstMessage = ""
			out = append(out, c)
		}
	}
}

// OpenCatalog opens the bucket on js and reads the catalog.
func OpenCatalog(ctx context.Context, js jetstream.JetStream) ([]CatalogEntry, error) {
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("projection: open bucket: %w", err)
	}
	return ReadCatalog(ctx, kv)
}

// sortCatalog orders newest first; ties by session id, so the order is
// stable.
func sortCatalog(c []CatalogEntry) {
	slices.SortFunc(c, func(a, b CatalogEntry) int {
		if r := cmp.Compare(b.UpdatedMs, a.UpdatedMs); r != 0 {
			return r
		}
		return cmp.Compare(a.SessionID, b.SessionID)
	})
}

// Catalog returns every session's catalog entry, newest first. It is
// served from memory: the entries as last written, re-sorted only after a
// flush changed something.
func (w *Worker) Catalog(ctx context.Context) ([]CatalogEntry, error) {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("projection: catalog: %w", errNotReady)
	}
	// One rebuild at a time: a caller arriving during one waits for it
	// rather than take the catalog before it (nil after an erase).
	w.catMu.Lock()
	defer w.catMu.Unlock()
	w.mu.Lock()
	if !w.catDirty {
		out := w.catalog
		w.mu.Unlock()
		return out, nil
	}
	states := make([]*sessionState, 0, len(w.sessions))
	for _, s := range w.sessions {
		states = append(states, s)
	}
	w.catDirty = false
	w.mu.Unlock()
	out := make([]CatalogEntry, 0, len(states))
	for _, s := range states {
		s.mu.Lock()
		if len(s.cat.Src) > 0 && s.listed {
			out = append(out, s.cat.clone())
		}
		s.mu.Unlock()
	}
	sortCatalog(out)
	w.mu.Lock()
	if !w.catDirty {
		// Kept only while nothing changed since the states were taken:
		// an erase meanwhile must not leave its session's entry (and
		// first message) cached.
		w.catalog = out
	}
	w.mu.Unlock()
	return out, nil
}

// clone copies the entry deep enough that the worker can go on changing
// its own.
func (c CatalogEntry) clone() CatalogEntry {
	c.Nodes = slices.Clone(c.Nodes)
	c.DeletedOn = slices.Clone(c.DeletedOn)
	c.Files = slices.Clone(c.Files)
	c.Src = slices.Clone(c.Src)
	return c
}
