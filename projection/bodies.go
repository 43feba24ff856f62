package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// streamBodies is the session.BodySource of one context query: the
// bodies of its index's window, read from the event streams a read-ahead
// at a time, behind the bodies the session kept from its last query
// (known, looked up under the session's lock).
//
// A context asks for its bodies in the order of Index.Refs, which is
// mostly stream order (a compaction's summary comes before the entries it
// kept, an edit after the entry it edits). At the first body not at hand,
// the source plans the next stretch of the window: the following bodies,
// in that order, up to ahead bytes by their sizes (Index.Sizes; at least
// one), and reads them in stream order with one ordered consumer per run
// of nearby sequences (prefetch.go). A body is dropped once served, so the
// source holds at most one stretch (or one line larger than ahead).
//
// A body that is not where its ref says (or asked out of order) is
// fetched on its own with direct gets (fetch).
type streamBodies struct {
	ctx     context.Context
	nc      *nats.Conn
	js      jetstream.JetStream
	filters map[string]string // stream → subject filter of the session
	known   func(session.Ref) ([]byte, bool)
	cache   map[session.Ref][]byte // read ahead, not yet served
	ahead   int64

	refs  []session.Ref
	sizes []int64
	next  int // position in refs of the next body asked

	// keep collects the window's bodies for the session's body cache,
	// when the whole window fits maxKeep; nil otherwise.
	keep      map[session.Ref][]byte
	keepBytes int64

	// pending is the stretch after the one being served, read while the
	// context is written (nil: none).
	pending *stretch

	// files serves the bodies of this machine's lines from its session
	// files first (filebodies.go); nil: the store serves every body.
	files *fileBodies
	// recycle: the caller holds a body only until it asks for the one
	// after the next (EachMessage: an entry and its edit), and the window
	// is not kept, so the chunks of the stretch served before the last
	// can be read into again (fileBodies.release).
	recycle     bool
	prev, older *chunks

	fetches int
	reads   atomic.Int64
	// fromFile and fromStore count the bodies each source served.
	fromFile, fromStore atomic.Int64
	held                int64 // bytes in cache now
	peak                int64 // bytes in cache and pending at most
}

// stretch is a part of the window read ahead: positions [start, end) of
// refs, less the bodies known already, read by their own goroutine into
// bodies.
type stretch struct {
	start, end int
	bytes      int64 // planned, by Index.Sizes
	bodies     map[session.Ref][]byte
	chunks     *chunks // what the files' lines were read into
	err        error
	cancel     context.CancelFunc
	done       chan struct{}
}

// bodyBatch is how many messages one direct get returns at most; bodyBytes
// bounds the bytes of one batch, and of what an ordered consumer buffers.
const (
	bodyBatch = 1024
	bodyBytes = 8 << 20
)

// defaultReadAhead is the bytes of bodies a context query reads ahead of
// what it writes.
const defaultReadAhead = 16 << 20

func newStreamBodies(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, filters map[string]string, known func(session.Ref) ([]byte, bool), ix *session.Index, ahead, maxKeep int64) *streamBodies {
	if known == nil {
		known = func(session.Ref) ([]byte, bool) { return nil, false }
	}
	if ahead <= 0 {
		ahead = defaultReadAhead
	}
	b := &streamBodies{ctx: ctx, nc: nc, js: js, filters: filters, known: known, cache: map[session.Ref][]byte{},
		ahead: ahead, refs: ix.Refs, sizes: ix.Sizes}
	var total int64
	for _, n := range ix.Sizes {
		total += n
	}
	if total <= maxKeep {
		b.keep = make(map[session.Ref][]byte, len(ix.Refs))
	}
	return b
}

var _ session.BodySource = (*streamBodies)(nil)

// Body implements session.BodySource.
func (b *streamBodies) Body(ref session.Ref) ([]byte, error) {
	pos := -1
	if b.next < len(b.refs) && b.refs[b.next] == ref {
		pos = b.next
		b.next++
	}
	body, err := b.body(ref, pos)
	if err == nil && b.keep != nil {
		if _, ok := b.keep[ref]; !ok {
			b.keep[ref] = body
			b.keepBytes += int64(len(body))
		}
	}
	return body, err
}

func (b *streamBodies) body(ref session.Ref, pos int) ([]byte, error) {
	if body, ok := b.known(ref); ok {
		return body, nil
	}
	if body, ok := b.take(ref); ok {
		return body, nil
	}
	if pos >= 0 {
		if err := b.readAhead(pos); err != nil {
			return nil, err
		}
		if body, ok := b.take(ref); ok {
			return body, nil
		}
	}
	return b.fetchOne(ref)
}

// take serves a body read ahead, and forgets it.
func (b *streamBodies) take(ref session.Ref) ([]byte, bool) {
	body, ok := b.cache[ref]
	if ok {
		delete(b.cache, ref)
		b.held -= int64(len(body))
	}
	return body, ok
}

// put holds a body read ahead.
func (b *streamBodies) put(ref session.Ref, body []byte) {
	if old, ok := b.cache[ref]; ok {
		b.held -= int64(len(old))
	}
	b.cache[ref] = body
	b.held += int64(len(body))
	b.peak = max(b.peak, b.held)
}

// readAhead serves the bodies of the window from position pos on: the
// stretch read ahead while the last one was served when it covers pos
// (else a new one, waited for), and starts reading the next stretch in
// the background, so that reading the store and writing the context
// overlap. Each stretch is at most half of ahead bytes (at least one
// body), so what is held and pending stays within ahead, as it did when
// one stretch of ahead bytes was read at a time. What an earlier stretch
// left unserved is dropped first.
func (b *streamBodies) readAhead(pos int) error {
	clear(b.cache)
	b.held = 0
	st := b.pending
	b.pending = nil
	if st != nil && !(st.start <= pos && pos < st.end) {
		st.stop()
		if b.recycle {
			b.files.release(st.chunks) // never served
		}
		st = nil
	}
	if st == nil {
		st = b.startStretch(pos)
	}
	<-st.done
	if st.err != nil {
		return st.err
	}
	if b.recycle {
		// The caller may still hold a body of the stretch served last
		// (an entry whose edit it asks for now), not one of the stretch
		// before it.
		b.files.release(b.older)
		b.older, b.prev = b.prev, st.chunks
	}
	for ref, body := range st.bodies {
		b.put(ref, body)
	}
	if st.end < len(b.refs) {
		b.pending = b.startStretch(st.end)
		b.peak = max(b.peak, b.held+b.pending.bytes)
	}
	return nil
}

// startStretch plans the stretch from position pos (the bodies not known,
// up to half of ahead bytes, at least one) and starts reading it.
func (b *streamBodies) startStretch(pos int) *stretch {
	st := &stretch{start: pos, end: pos, bodies: map[session.Ref][]byte{}, done: make(chan struct{})}
	var need []session.Ref
	for ; st.end < len(b.refs); st.end++ {
		j := st.end
		if _, ok := b.known(b.refs[j]); ok {
			continue
		}
		if len(need) > 0 && st.bytes+b.sizes[j] > max(1, b.ahead/2) {
			break
		}
		st.bytes += b.sizes[j]
		need = append(need, b.refs[j])
	}
	ctx, cancel := context.WithCancel(b.ctx)
	st.cancel = cancel
	go func() {
		defer close(st.done)
		put := func(ref session.Ref, body []byte) { st.bodies[ref] = body }
		if b.files != nil {
			st.chunks = &chunks{fb: b.files, size: min(fileChunk, max(64<<10, b.ahead/2)), recycle: b.recycle}
			rest, err := b.files.read(ctx, need, st.chunks, put)
			if err != nil {
				st.err = err
				return
			}
			b.fromFile.Add(int64(len(need) - len(rest)))
			need = rest
		}
		st.err = b.prefetch(ctx, need, func(ref session.Ref, body []byte) {
			b.fromStore.Add(1)
			put(ref, body)
		})
	}()
	return st
}

// stop cancels the stretch's read and waits for it.
func (st *stretch) stop() {
	st.cancel()
	<-st.done
}

// close stops the read ahead of a stretch not served and closes the
// files read: the query is done.
func (b *streamBodies) close() error {
	if b.pending != nil {
		b.pending.stop()
		b.pending = nil
	}
	if b.files != nil {
		return b.files.close()
	}
	return nil
}

// fetchOne reads one body with direct gets, from its ref on (or from the
// first chunk of a split line).
func (b *streamBodies) fetchOne(ref session.Ref) ([]byte, error) {
	stream, seq := refStream(ref), refSeq(ref)
	filter, ok := b.filters[stream]
	if !ok {
		return nil, fmt.Errorf("projection: body %s: no subject of the session on %s", refString(ref), stream)
	}
	start := seq
	for attempt := 0; attempt < 2; attempt++ {
		got := map[session.Ref][]byte{}
		first, err := b.fetch(stream, filter, start, got)
		if err != nil {
			return nil, err
		}
		if body, ok := got[ref]; ok {
			b.fromStore.Add(1)
			return body, nil
		}
		// The ref's message is the last chunk of a split line: its
		// chunks start i-1 sequences earlier (an atomic batch).
		if first.seq == seq && first.chunk > 1 && start == seq {
			start = seq - uint64(first.chunk-1)
			continue
		}
		break
	}
	return nil, fmt.Errorf("projection: body %s: not found on %s", refString(ref), filter)
}

type firstMsg struct {
	seq   uint64
	chunk int
}

// fetch reads up to bodyBatch messages of filter from seq on into got,
// every complete line by its ref.
func (b *streamBodies) fetch(stream, filter string, seq uint64, got map[session.Ref][]byte) (firstMsg, error) {
	b.fetches++
	asm := eventlog.NewAssemblers(false)
	var first firstMsg
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	err := directGet(ctx, b.nc, stream, filter, seq, bodyBatch, bodyBytes, func(m *nats.Msg, mseq uint64) {
		if first.seq == 0 {
			i, _, _ := eventlog.ParseChunk(m.Header.Get(eventlog.HdrChunk))
			first = firstMsg{seq: mseq, chunk: i}
		}
		if ev := assemble(asm, stream, mseq, m); ev != nil && ev.Op == "" {
			got[makeRef(stream, ev.Seq)] = session.ToValidUTF8(ev.Raw)
		}
	})
	return first, err
}

// assemble adds a message read by directGet to its subject's assembler
// and returns the line it completes, nil for none: a chunk run that
// starts before the batch, or a message that cannot be read, is skipped.
func assemble(asm *eventlog.Assemblers, stream string, seq uint64, m *nats.Msg) *eventlog.Event {
	subj := m.Header.Get("Nats-Subject")
	ev, err := asm.Add(stream, subj, seq, m.Header, m.Data)
	if err != nil {
		return nil
	}
	return ev
}

// directGet asks stream in one direct get for up to batch messages of
// filter from seq on (at most maxBytes of them) and hands each to fn in
// stream order: no consumer is made, so a short read costs one round trip.
//
// The reply is read from a channel of batch+1 (the batch and its end):
// nats.go's SubscribeSync makes a channel of 65,536 slots per subscription,
// 512 KiB for each request, and a restart over 10,000 sessions allocated
// 2.6 GB that way (docs/PERFORMANCE.md, "A restart's garbage").
func directGet(ctx context.Context, nc *nats.Conn, stream, filter string, seq uint64, batch, maxBytes int, fn func(m *nats.Msg, seq uint64)) error {
	req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": filter, "batch": batch, "max_bytes": maxBytes})
	inbox := nc.NewRespInbox()
	replies := make(chan *nats.Msg, batch+1)
	sub, err := nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return fmt.Errorf("projection: direct get: %w", err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return fmt.Errorf("projection: direct get: %w", err)
	}
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return fmt.Errorf("projection: direct get %s from %d: %w", filter, seq, ctx.Err())
		}
		if st := m.Header.Get("Status"); st != "" {
			if st == "204" || st == "404" {
				return nil // end of batch, or nothing there
			}
			return fmt.Errorf("projection: direct get %s from %d: status %s %s", filter, seq, st, m.Header.Get("Description"))
		}
		mseq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return fmt.Errorf("projection: direct get: bad sequence header: %w", err)
		}
		fn(m, mseq)
	}
}

// ErrUnknownSession is returned for a session the projection does not
// know.
var ErrUnknownSession = errors.New("projection: unknown session")
