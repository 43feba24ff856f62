package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// The listener's user has no consumers (docs/SUBSCRIBING.md): it reads a
// stream live on a core subscription to the stream's subjects, where the
// daemon republishes each message as it is stored, with the stream
// sequence in its Nats-Sequence header, and reads what is stored by direct
// get. A follower joins the two into one read of a stream, each message
// once and in stream order.
//
// It keeps the next sequence it wants. A live message past it first has
// the gap read by direct get: messages published while the follower
// caught up, or dropped by a subscription too slow to take them (nats.go
// drops past its pending limits), or a message another reader had sent on
// this subject early (a direct get's reply subject is the requester's
// choice). A message before it was had already. Sequences of erased
// messages are simply never found.
type follower struct {
	nc     *nats.Conn
	stream string // PI_LOCAL
	filter string // pi.evt.>
	next   uint64 // the next sequence to hand on
}

// errNoAnswer: a request got no answer at all (the daemon may have
// dropped it); it is made again.
var errNoAnswer = errors.New("no answer")

// batchSize is how many messages one direct get returns at most.
const batchSize = 256

// requestTimeout bounds one direct get.
const requestTimeout = 5 * time.Second

// last returns the stream's last sequence and subject on the follower's
// subjects, 0 and "" when there is none (or no stream: PI_ALL without a
// hub reads as empty).
func (f *follower) last() (uint64, string, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": f.filter})
	var m *nats.Msg
	var err error
	for range attempts {
		if m, err = f.nc.Request("$JS.API.DIRECT.GET."+f.stream, req, requestTimeout); !errors.Is(err, nats.ErrTimeout) {
			break
		}
	}
	if err != nil {
		return 0, "", fmt.Errorf("%s: last message: %w", f.stream, err)
	}
	if st := m.Header.Get("Status"); st == "404" {
		return 0, "", nil
	} else if st != "" {
		return 0, "", fmt.Errorf("%s: last message: %s %s", f.stream, st, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%s: last message: no sequence", f.stream)
	}
	return seq, m.Header.Get("Nats-Subject"), nil
}

// attempts is how often a request that got no answer is made: the
// daemon drops requests past the 256 it keeps waiting.
const attempts = 5

// fill hands on the stored messages from f.next up to, not including,
// upto (0: every stored message), in order.
func (f *follower) fill(ctx context.Context, upto uint64, hand func(*nats.Msg)) error {
	for upto == 0 || f.next < upto {
		var n int
		var err error
		for range attempts {
			if n, err = f.batch(ctx, upto, hand); !errors.Is(err, errNoAnswer) {
				break
			}
		}
		if err != nil {
			return err
		}
		if n == 0 {
			break // nothing stored past f.next (yet)
		}
	}
	if upto > f.next {
		f.next = upto // the rest of the gap was erased
	}
	return nil
}

// batch reads one batch of stored messages from f.next and returns how
// many it handed on.
func (f *follower) batch(ctx context.Context, upto uint64, hand func(*nats.Msg)) (int, error) {
	inbox := f.nc.NewRespInbox()
	sub, err := f.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"seq": f.next, "batch": batchSize, "next_by_subj": f.filter})
	if err := f.nc.PublishRequest("$JS.API.DIRECT.GET."+f.stream, inbox, req); err != nil {
		return 0, err
	}
	n := 0
	for {
		wait, cancel := context.WithTimeout(ctx, requestTimeout)
		m, err := sub.NextMsgWithContext(wait)
		cancel()
		if err != nil && ctx.Err() == nil {
			// Asked again from f.next: what was handed on is not again.
			return n, fmt.Errorf("%s: read from %d: %w", f.stream, f.next, errNoAnswer)
		}
		if err != nil {
			return n, fmt.Errorf("%s: read from %d: %w", f.stream, f.next, err)
		}
		switch st := m.Header.Get("Status"); st {
		case "":
		case "204", "404": // the end of the batch; nothing at or after f.next
			return n, nil
		default:
			return n, fmt.Errorf("%s: read from %d: %s %s", f.stream, f.next, st, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil || seq < f.next {
			return n, errors.New(f.stream + ": a stored message without its sequence")
		}
		if upto != 0 && seq >= upto {
			return n, nil // the gap is filled; the rest comes live
		}
		// A stored message has its subject in a header; the reply
		// subject is the inbox.
		m.Subject = m.Header.Get("Nats-Subject")
		f.next = seq + 1
		hand(m)
		n++
	}
}

// errAhead: the follower wants a sequence past the stream's end. The
// store is not the one it followed (the daemon's state dir was wiped, or
// the daemon reinstalled): its sequences started again from 1, and every
// message below the position kept would be skipped as had already.
var errAhead = errors.New("position past the stream's end")

// catchUp hands on what was stored from f.next up to the stream's last
// message: after a reconnect, the subscription was gone while the
// daemon was down (or the connection broken), and what was stored
// meanwhile comes live no more. Without it, it was read only when a later
// message showed the gap, maybe never. Messages that come live meanwhile
// are at or below the last read here and are skipped by live.
func (f *follower) catchUp(ctx context.Context, hand func(*nats.Msg)) error {
	last, _, err := f.last()
	if err != nil {
		return err
	}
	if err := f.check(last); err != nil {
		return err
	}
	return f.fill(ctx, last+1, hand)
}

// check fails with errAhead when f.next is past a stream whose last
// sequence is last.
func (f *follower) check(last uint64) error {
	if f.next > last+1 {
		return fmt.Errorf("%s: next sequence %d, but the stream ends at %d: %w (the daemon's state dir was wiped or the daemon reinstalled since); start again from the start (-from-start) or from now",
			f.stream, f.next, last, errAhead)
	}
	return nil
}

// live hands on a live message of the stream, after the gap before it,
// unless it was had already.
func (f *follower) live(ctx context.Context, m *nats.Msg, hand func(*nats.Msg)) error {
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil || seq < f.next {
		return nil
	}
	// The stored subject, from the headers as for a stored message: the
	// subject a message came on is another reader's choice if it sent it.
	m.Subject = m.Header.Get("Nats-Subject")
	if seq > f.next {
		if err := f.fill(ctx, seq, hand); err != nil {
			return err
		}
	}
	f.next = seq + 1
	hand(m)
	return nil
}
