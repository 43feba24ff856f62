package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// streamBodies is a session.BodySource over the event streams, in front of
// which sit the bodies a caller already holds (known, never modified). A
// context asks for its window's bodies in window order, which is mostly
// stream order, so a miss fetches a batch of the session's following lines
// with one direct-get request (next_by_subj, batch) instead of one round
// trip per entry. What a batch brings beyond the window is dropped with
// the query (see window).
type streamBodies struct {
	ctx     context.Context
	nc      *nats.Conn
	filters map[string]string // stream → subject filter of the session
	known   map[session.Ref][]byte
	cache   map[session.Ref][]byte // read by this query
	fetches int
}

// bodyBatch is how many messages one direct get returns at most; bodyBytes
// bounds the bytes of one batch.
const (
	bodyBatch = 1024
	bodyBytes = 8 << 20
)

func newStreamBodies(ctx context.Context, nc *nats.Conn, filters map[string]string, known map[session.Ref][]byte) *streamBodies {
	return &streamBodies{ctx: ctx, nc: nc, filters: filters, known: known, cache: make(map[session.Ref][]byte)}
}

var _ session.BodySource = (*streamBodies)(nil)

// windowBodies are the bodies of one context's window and their size.
type windowBodies struct {
	bodies map[session.Ref][]byte
	bytes  int64
}

// window returns the bodies of refs (all served by now). When the known
// bodies are exactly the window, the same map is returned.
func (b *streamBodies) window(refs []session.Ref) windowBodies {
	var w windowBodies
	if b.known != nil && len(b.cache) == 0 && len(b.known) == len(refs) {
		w.bodies = b.known
		for _, body := range b.known {
			w.bytes += int64(len(body))
		}
		return w
	}
	w.bodies = make(map[session.Ref][]byte, len(refs))
	for _, r := range refs {
		body, ok := b.known[r]
		if !ok {
			body, ok = b.cache[r]
		}
		if ok {
			w.bodies[r] = body
			w.bytes += int64(len(body))
		}
	}
	return w
}

// Body implements session.BodySource.
func (b *streamBodies) Body(ref session.Ref) ([]byte, error) {
	if body, ok := b.known[ref]; ok {
		return body, nil
	}
	if body, ok := b.cache[ref]; ok {
		return body, nil
	}
	stream, seq := refStream(ref), refSeq(ref)
	filter, ok := b.filters[stream]
	if !ok {
		return nil, fmt.Errorf("projection: body %s: no subject of the session on %s", refString(ref), stream)
	}
	start := seq
	for attempt := 0; attempt < 2; attempt++ {
		first, err := b.fetch(stream, filter, start)
		if err != nil {
			return nil, err
		}
		if body, ok := b.cache[ref]; ok {
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

// fetch reads up to bodyBatch messages of filter from seq on and caches
// every complete line by its ref.
func (b *streamBodies) fetch(stream, filter string, seq uint64) (firstMsg, error) {
	b.fetches++
	req, _ := json.Marshal(map[string]any{"seq": seq, "next_by_subj": filter, "batch": bodyBatch, "max_bytes": bodyBytes})
	inbox := b.nc.NewRespInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return firstMsg{}, fmt.Errorf("projection: direct get: %w", err)
	}
	defer sub.Unsubscribe()
	if err := b.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return firstMsg{}, fmt.Errorf("projection: direct get: %w", err)
	}
	asm := map[string]*eventlog.Assembler{}
	var first firstMsg
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	for n := 0; ; n++ {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return first, fmt.Errorf("projection: direct get %s from %d: %w", filter, seq, err)
		}
		if st := m.Header.Get("Status"); st != "" {
			if st == "204" || st == "404" {
				return first, nil // end of batch, or nothing there
			}
			return first, fmt.Errorf("projection: direct get %s from %d: status %s %s", filter, seq, st, m.Header.Get("Description"))
		}
		subj := m.Header.Get("Nats-Subject")
		mseq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return first, fmt.Errorf("projection: direct get: bad sequence header: %w", err)
		}
		if n == 0 {
			i, _, _ := eventlog.ParseChunk(m.Header.Get(eventlog.HdrChunk))
			first = firstMsg{seq: mseq, chunk: i}
		}
		a := asm[subj]
		if a == nil {
			a = eventlog.NewAssembler(false)
			asm[subj] = a
		}
		ev, err := a.Add(stream, subj, mseq, m.Header, m.Data)
		if err != nil || ev == nil {
			continue // a chunk run that starts before the batch, or control events
		}
		if ev.Op == "" {
			b.cache[makeRef(stream, ev.Seq)] = session.ToValidUTF8(ev.Raw)
		}
	}
}

// ErrUnknownSession is returned for a session the projection does not
// know.
var ErrUnknownSession = errors.New("projection: unknown session")
