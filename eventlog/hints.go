package eventlog

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hints hands the messages a writer in this process has just stored in a
// stream, in order, to one reader in the same process, so that a live line
// goes on without waiting for a consumer to deliver what the process itself
// stored: each delivery on the way costs a wake-up of the server and of the
// client. They are hints: whatever they drop, or a reader misses, the
// stream's consumers deliver as before, and a reader takes a hint only when
// it is the sequence right after the last it handled.
type hints struct {
	c      chan []jetstream.Msg
	stream string
	// copyData: the writer's message data may be reused after the store
	// (the tailer's read buffer), so the hint keeps a copy.
	copyData bool
}

// hintsHeld is how many small writes a busy reader's hints hold; more are
// dropped.
const hintsHeld = 8

// hintBytes bounds the writes handed over: live lines, not a backlog's
// batches (its reader reads those from the stream anyway).
const hintBytes = 64 << 10

func newHints(stream string, copyData bool) hints {
	return hints{c: make(chan []jetstream.Msg, hintsHeld), stream: stream, copyData: copyData}
}

// offer hands msgs, stored from stream sequence first on, to the reader,
// never waiting.
func (h hints) offer(first uint64, msgs []*nats.Msg) {
	size := 0
	for _, m := range msgs {
		size += len(m.Data)
	}
	if h.c == nil || size > hintBytes || len(h.c) == cap(h.c) {
		return
	}
	out := make([]jetstream.Msg, len(msgs))
	now := time.Now()
	for i, m := range msgs {
		if h.copyData {
			c := *m
			c.Data = append([]byte(nil), m.Data...)
			m = &c
		}
		out[i] = &storedMsg{msg: m, meta: jetstream.MsgMetadata{
			Sequence: jetstream.SequencePair{Stream: first + uint64(i)}, Stream: h.stream, Timestamp: now,
			NumPending: uint64(len(msgs) - 1 - i),
		}}
	}
	select {
	case h.c <- out:
	default:
	}
}

// InOrder is what a reader that has handled every message up to last does
// with the next one, at seq, which came as a hint (hinted) or from its
// consumer: take it; skip it (handled already: a hint was taken before the
// consumer brought it); or stop there, for a hint that is not right after
// last (the consumer brings it, in order).
func InOrder(seq, last uint64, hinted bool) (take, stop bool) {
	switch {
	case seq <= last:
		return false, false
	case hinted && seq != last+1:
		return false, true
	}
	return true, false
}

// DrainHints drops the hints left over: a reader starting (again) takes
// none from before, since they may name messages an erase removed since
// (the stream's consumers never deliver those).
func DrainHints(c <-chan []jetstream.Msg) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

// storedMsg is a message as a writer in this process stored it, handed
// over by hints. It has what a reader of the stream uses (subject,
// headers, data and the stream sequence); it was not delivered by a
// consumer, so there is nothing to acknowledge.
type storedMsg struct {
	jetstream.Msg // nil: the acknowledgement methods are not to be called
	msg           *nats.Msg
	meta          jetstream.MsgMetadata
}

func (m *storedMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.meta, nil }
func (m *storedMsg) Data() []byte                              { return m.msg.Data }
func (m *storedMsg) Headers() nats.Header                      { return m.msg.Header }
func (m *storedMsg) Subject() string                           { return m.msg.Subject }
func (m *storedMsg) Reply() string                             { return "" }
