package projection

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// A catalog entry's FirstMessage is session text: it is held in memory
// only, never in the bucket. An erase purges a session's keys, but a
// purged or superseded KV value's bytes stay in the bucket stream's block
// files until compacted, so the text of an erased session could be found
// on disk afterwards. The session's own event stream is what erase
// removes whole; the first message is read back from there.
//
// While the worker runs, FirstMessage is the tree's, set as lines are
// applied. After a restart the catalog comes from the bucket without it,
// and fillFirstMessages reads it back, in the background: Ready and
// Catalog do not wait for it.

const (
	// fillWorkers is how many sessions are read at once. The read is
	// outside the daemon's memory budget: at most fillWorkers ×
	// (firstMaxBytes + firstBatchBytes), 20 MiB, and only while it runs.
	fillWorkers = 2
	// A session's first events are read in direct gets of firstBatch
	// messages (at most firstBatchBytes); a session is given up on after
	// firstMaxMsgs messages or firstMaxBytes bytes (a first message with
	// a large image is a few chunks of 256 KiB). A tree loaded later sets
	// it from every line.
	firstBatch      = 32
	firstBatchBytes = 2 << 20
	firstMaxMsgs    = 256
	firstMaxBytes   = 8 << 20
)

// fillFirstMessages reads the first message of each session in states
// (newest first: the list's top rows come first) from its event stream,
// fillWorkers at a time, until done or ctx ends. A session whose tree is
// loaded meanwhile, or that already has its first message, is skipped: the
// tree sets it.
func (w *Worker) fillFirstMessages(ctx context.Context, states []*sessionState) {
	defer close(w.filled)
	todo := make(chan *sessionState)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed int
	var lastErr error
	for i := 0; i < fillWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range todo {
				if err := w.fillFirstMessage(ctx, s); err != nil && ctx.Err() == nil {
					mu.Lock()
					failed, lastErr = failed+1, err
					mu.Unlock()
				}
			}
		}()
	}
	for _, s := range states {
		select {
		case todo <- s:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(todo)
	wg.Wait()
	if failed > 0 {
		// Once for the whole pass: each session's tree sets it when the
		// session is next written to.
		w.logger.Warn("projection: first messages left unread", "sessions", failed, "err", lastErr)
	}
}

// FillingFirstMessages reports whether the catalog's first messages are
// still being read back after a start: a list drawn now lacks some, and
// the web view asks again.
func (w *Worker) FillingFirstMessages() bool { return closed(w.ready) && !closed(w.filled) }

// FirstMessagesFilled is closed once the first messages have been read
// back after a start (before Ready when there were none to read), or the
// worker stopped meanwhile. Never, if Run failed before it loaded the
// catalog.
// The daemon gives the memory of its start back after it: the reads load
// the store's blocks into caches that outlive them (cmd/pisyncd/settle.go).
func (w *Worker) FirstMessagesFilled() <-chan struct{} { return w.filled }

// fillFirstMessage reads and sets one session's first message.
func (w *Worker) fillFirstMessage(ctx context.Context, s *sessionState) error {
	s.mu.Lock()
	skip := s.erased || s.tree != nil || s.cat.FirstMessage != "" || len(s.cat.Src) == 0
	src := s.src()
	s.mu.Unlock()
	if skip {
		return nil
	}
	t, err := w.readFirstMessage(ctx, s.sid, src)
	if err != nil {
		return err
	}
	text := t.FirstMessage()
	s.mu.Lock()
	// An erased session's text does not come back; a tree loaded
	// meanwhile set it from every line.
	set := !s.erased && s.tree == nil && s.cat.FirstMessage == "" && text != ""
	if set {
		s.cat.FirstMessage = text
	}
	// The header is read anyway.
	parent := !s.erased && s.readParent(t.Header())
	s.mu.Unlock()
	if set {
		w.firstRead.Add(1)
	}
	if set || parent {
		w.mu.Lock()
		w.catDirty = true
		w.mu.Unlock()
	}
	return nil
}

// readFirstMessage feeds the session's first lines, up to the sequences
// in upTo and in the order rebuild feeds them (PI_LOCAL, then PI_ALL less
// this node's lines), to a tree until it has a first message, within
// firstMaxMsgs and firstMaxBytes, and returns the tree.
func (w *Worker) readFirstMessage(ctx context.Context, sid string, upTo Src) (*session.Tree, error) {
	s := newSessionState(sid)
	s.tree = session.NewTree()
	s.tree.SetRules(w.opts.Rules)
	msgs, size := 0, 0
	for _, stream := range []string{eventlog.LocalStream, eventlog.AllStream} {
		filter, ok := w.filters(sid)[stream]
		if !ok || upTo[stream] == 0 {
			continue
		}
		asm := eventlog.NewAssemblers(false)
		for seq := uint64(1); s.tree.FirstMessage() == "" && seq <= upTo[stream]; {
			if msgs >= firstMaxMsgs || size >= firstMaxBytes {
				return s.tree, nil
			}
			got := 0
			gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := directGet(gctx, w.nc, stream, filter, seq, firstBatch, firstBatchBytes, func(m *nats.Msg, mseq uint64) {
				got++
				msgs, size = msgs+1, size+len(m.Data)
				seq = mseq + 1
				if mseq > upTo[stream] || s.tree.FirstMessage() != "" {
					return // past what the catalog applied, or found
				}
				ev := assemble(asm, stream, mseq, m)
				if ev == nil || ev.Op != "" || (stream == eventlog.AllStream && ev.Node == w.opts.Node) {
					return
				}
				ev.SID = sid
				s.feed(ev, ev.Node) // a state kept only for this read
			})
			cancel()
			if err != nil {
				return nil, fmt.Errorf("projection: first message of %s: %w", sid, err)
			}
			if got == 0 {
				break
			}
		}
	}
	return s.tree, nil
}
