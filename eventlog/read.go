package eventlog

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Event is one stored line (its chunks joined) with its metadata.
type Event struct {
	Stream   string
	Subject  string
	Seq      uint64 // stream sequence of the line's last message
	Node     string
	SID      string
	ID       string
	ParentID string
	Type     string
	File     string
	Off      int64
	Op       string
	SrcSeq   uint64 // Pi-Src-Seq, on PI_HUB and PI_ALL
	Sha      [32]byte
	Raw      []byte    // nil when read headers-only
	Size     int       // the line's length in bytes, also when read headers-only
	Time     time.Time // when the server stored it; set by Local.Last only
}

// Assembler joins the chunks of split lines back into events. Feed it a
// subject's messages in stream order.
type Assembler struct {
	headersOnly bool
	cur         *Event
	startSeq    uint64 // sequence of cur's first chunk
	next, total int
	// raw is the line being joined. It goes with the event when the line
	// is whole: a buffer kept for the next line would hold the largest
	// line ever seen on the subject for as long as the reader runs, and
	// the event its copy besides.
	raw []byte
}

// msgSizeHeader is the header in which a headers-only consumer gives the
// size of the payload it left out.
const msgSizeHeader = "Nats-Msg-Size"

// NewAssembler returns an assembler; headersOnly skips payloads and the
// hash check.
func NewAssembler(headersOnly bool) *Assembler { return &Assembler{headersOnly: headersOnly} }

// PendingStart is the stream sequence of the first chunk of a split line
// still missing chunks, 0 when none is.
func (a *Assembler) PendingStart() uint64 {
	if a.cur == nil {
		return 0
	}
	return a.startSeq
}

// Add takes one message. It returns the completed event, or nil while a
// split line is still incomplete.
func (a *Assembler) Add(stream, subj string, seq uint64, h nats.Header, data []byte) (*Event, error) {
	i, n, err := ParseChunk(h.Get(HdrChunk))
	if err != nil {
		return nil, err
	}
	if a.cur != nil && (i != a.next || n != a.total || h.Get(HdrSha) != fmt.Sprintf("%x", a.cur.Sha)) {
		// A chunk run broke off: only a mirror or source can show a
		// batch's prefix, and the rest follows later. Start over here.
		a.cur = nil
	}
	if i == 1 {
		ev, err := newEvent(stream, subj, seq, h)
		if err != nil {
			return nil, err
		}
		a.cur, a.next, a.total, a.startSeq = ev, 1, n, seq
		a.raw = nil
	}
	if a.cur == nil {
		return nil, fmt.Errorf("eventlog: %s seq %d: chunk %d/%d without its start", subj, seq, i, n)
	}
	if a.headersOnly {
		// A headers-only delivery says how long the payload it left out
		// was.
		size, _ := strconv.Atoi(h.Get(msgSizeHeader))
		a.cur.Size += size
	} else {
		if a.raw == nil && n > 1 {
			// Room for a few chunks at once; append grows it by a
			// quarter after that. The count announced is not believed
			// further: a peer could announce a million chunks.
			a.raw = make([]byte, 0, min(n, 8)*len(data))
		}
		a.raw = append(a.raw, data...)
	}
	if i < n {
		a.next++
		return nil, nil
	}
	ev := a.cur
	a.cur = nil
	ev.Seq = seq
	if !a.headersOnly {
		ev.Raw, a.raw = a.raw, nil // a copy: data is the consumer's message
		ev.Size = len(ev.Raw)
		if ev.Op == "" && sha256.Sum256(ev.Raw) != ev.Sha {
			return nil, fmt.Errorf("eventlog: %s seq %d: line does not match its %s", subj, seq, HdrSha)
		}
	}
	return ev, nil
}

func newEvent(stream, subj string, seq uint64, h nats.Header) (*Event, error) {
	node, sid, err := ParseSubject(subj)
	if err != nil {
		return nil, err
	}
	ev := &Event{
		Stream: stream, Subject: subj, Seq: seq, Node: node, SID: sid,
		ID: fromHeader(h.Get(HdrID)), ParentID: fromHeader(h.Get(HdrParent)), Type: fromHeader(h.Get(HdrType)),
		File: h.Get(HdrFile), Op: h.Get(HdrOp),
	}
	if off := h.Get(HdrOff); off != "" {
		ev.Off, _ = strconv.ParseInt(off, 10, 64)
	}
	if src := h.Get(HdrSrcSeq); src != "" {
		ev.SrcSeq, _ = strconv.ParseUint(src, 10, 64)
	}
	if ev.Op == "" || h.Get(HdrSha) != "" {
		if ev.Sha, err = ParseSha(h.Get(HdrSha)); err != nil {
			return nil, fmt.Errorf("%w (subject %s seq %d)", err, subj, seq)
		}
	}
	return ev, nil
}

// LastSeq returns the stream sequence of the last message on subj, 0 when
// the subject is empty.
func LastSeq(ctx context.Context, s jetstream.Stream, subj string) (uint64, *jetstream.RawStreamMsg, error) {
	m, err := s.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fmt.Errorf("eventlog: last message of %s: %w", subj, err)
	}
	return m.Sequence, m, nil
}

// ErrShortRead means a read of a subject ended before the message it was
// asked to read up to: the consumer reported nothing more pending while the
// subject holds more. It happens right after JetStream was restarted in
// place, while a recovered stream's subject state is being rebuilt; a read
// taken as complete then would make lines the subject holds look new. The
// caller reads again later.
var ErrShortRead = errors.New("eventlog: the read ended before the subject's last message")

// ReadSubject calls fn for every event on subj with a sequence up to upTo
// (0: the subject's last sequence when the read starts), in stream order.
// upTo must be the sequence of a message on subj (its last one, as LastSeq
// returns): a read that ends before it is an error (ErrShortRead), never
// a shorter answer.
func ReadSubject(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, subj string, upTo uint64, headersOnly bool, fn func(*Event) error) error {
	if upTo == 0 {
		last, _, err := LastSeq(ctx, s, subj)
		if err != nil || last == 0 {
			return err
		}
		upTo = last
	}
	var reached uint64
	err := ReadFiltered(ctx, js, s.CachedInfo().Config.Name, subj, upTo, headersOnly, func(ev *Event) error {
		reached = ev.Seq
		return fn(ev)
	})
	if err == nil && reached < upTo {
		return fmt.Errorf("%w: %s read up to %d of %d", ErrShortRead, subj, reached, upTo)
	}
	return err
}

// ReadFiltered calls fn for every event on the subjects matching filter
// (which may hold wildcards) up to stream sequence upTo, in stream order;
// split lines are joined per subject.
func ReadFiltered(ctx context.Context, js jetstream.JetStream, stream, filter string, upTo uint64, headersOnly bool, fn func(*Event) error) error {
	return ReadFilteredFrom(ctx, js, stream, filter, 0, upTo, headersOnly, fn)
}

// ReadFilteredFrom is ReadFiltered starting at stream sequence from (0 or
// 1: the start). A resumed reader passes the sequence after the last event
// it had: an event's Seq is its line's last message, so the next message
// begins a line.
func ReadFilteredFrom(ctx context.Context, js jetstream.JetStream, stream, filter string, from, upTo uint64, headersOnly bool, fn func(*Event) error) error {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{filter},
		HeadersOnly:       headersOnly,
		InactiveThreshold: 30 * time.Second,
	}
	if from > 1 {
		if from > upTo {
			return nil
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("eventlog: read %s: %w", filter, err)
	}
	// An ordered consumer outlives Stop until its inactivity threshold;
	// reads come often (every session load, every `pisyncd events`), so
	// delete it as soon as the read is over.
	defer deleteConsumer(js, stream, cons)
	// A filter that matches nothing would make Next wait forever.
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		return nil
	}
	// Bounded by bytes: 512 chunks of a huge line would be 128 MiB buffered.
	it, err := cons.Messages(PullLimit(8<<20), LocalHeartbeat())
	if err != nil {
		return fmt.Errorf("eventlog: read %s: %w", filter, err)
	}
	defer it.Stop()
	asm := NewAssemblers(headersOnly)
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("eventlog: read %s: %w", filter, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("eventlog: read %s: %w", filter, err)
		}
		if meta.Sequence.Stream > upTo {
			return nil
		}
		data := msg.Data()
		if headersOnly {
			data = nil
		}
		ev, err := asm.Add(stream, msg.Subject(), meta.Sequence.Stream, msg.Headers(), data)
		if err != nil {
			return err
		}
		if ev != nil {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if meta.Sequence.Stream >= upTo || meta.NumPending == 0 {
			return nil
		}
	}
}

// deleteConsumer removes a reader's consumer (an ordered one: the one it
// holds now) once the reader is done, with a context of its own: the
// reader's may be the one that ended. Should the deletion fail, the
// consumer's inactive threshold removes it later.
func deleteConsumer(js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name)
}
