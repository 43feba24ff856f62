package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// hubMark is a message this machine took from or gave to the hub's PI_HUB:
// its sequence there, and the line it holds, known by its origin node and
// its position at the origin (Pi-Src-Seq). node is "" when only the
// sequence is known. time is when the hub stored it (Unix nanoseconds; 0:
// not known, as for the forwarder, whose acks do not say): the same line
// sent again after a restore, to the very sequence it had, is told by it.
type hubMark struct {
	seq  uint64
	node string
	src  uint64
	time int64
}

// String is how a mark is kept in the state bucket: "SEQ", "SEQ NODE SRC"
// or "SEQ NODE SRC TIME".
func (m hubMark) String() string {
	s := strconv.FormatUint(m.seq, 10)
	if m.node == "" {
		return s
	}
	s += " " + m.node + " " + strconv.FormatUint(m.src, 10)
	if m.time != 0 {
		s += " " + strconv.FormatInt(m.time, 10)
	}
	return s
}

// parseHubMark reads String's form; a bare sequence is what skipKey held
// before marks were kept.
func parseHubMark(s string) (hubMark, error) {
	f := strings.Fields(s)
	if len(f) != 1 && len(f) != 3 && len(f) != 4 {
		return hubMark{}, fmt.Errorf("hub mark %q: want SEQ, SEQ NODE SRC or SEQ NODE SRC TIME", s)
	}
	seq, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return hubMark{}, fmt.Errorf("hub mark %q: %w", s, err)
	}
	m := hubMark{seq: seq}
	if len(f) >= 3 {
		if m.src, err = strconv.ParseUint(f[2], 10, 64); err != nil {
			return hubMark{}, fmt.Errorf("hub mark %q: %w", s, err)
		}
		m.node = f[1]
	}
	if len(f) == 4 {
		if m.time, err = strconv.ParseInt(f[3], 10, 64); err != nil {
			return hubMark{}, fmt.Errorf("hub mark %q: %w", s, err)
		}
	}
	return m, nil
}

// markAt is the mark of the message at hub sequence seq, the last of
// batch when it is that one; otherwise only the sequence.
func markAt(batch []jetstream.Msg, seq uint64) hubMark {
	if len(batch) == 0 {
		return hubMark{seq: seq}
	}
	m := batch[len(batch)-1]
	meta, err := m.Metadata()
	if err != nil || meta.Sequence.Stream != seq {
		return hubMark{seq: seq}
	}
	node, _, _ := ParseSubject(m.Subject())
	src, _ := strconv.ParseUint(m.Headers().Get(HdrSrcSeq), 10, 64)
	return hubMark{seq: seq, node: node, src: src, time: meta.Timestamp.UnixNano()}
}

// rewound says why the hub's PI_HUB no longer holds mark ("" when it does,
// or cannot tell): it ends before the mark's sequence, or holds another
// line there. Both mean a store put back to an earlier copy of itself; a
// message erased since (a session, a node's lines) cannot tell, and is
// taken as held.
func rewound(ctx context.Context, hub jetstream.JetStream, mark hubMark) (string, error) {
	if mark.seq == 0 {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := hub.Stream(ctx, HubStream)
	if err != nil {
		return "", fmt.Errorf("hub %s info: %w", HubStream, err)
	}
	if last := s.CachedInfo().State.LastSeq; last < mark.seq {
		return fmt.Sprintf("its last message is %d, and this machine had its message %d", last, mark.seq), nil
	}
	if mark.node == "" {
		return "", nil
	}
	m, err := streamNext(ctx, s, mark.seq, UpPrefix+".>")
	if err != nil {
		return "", fmt.Errorf("hub %s message %d: %w", HubStream, mark.seq, err)
	}
	if m == nil || m.Sequence != mark.seq {
		return "", nil // erased since
	}
	node, _, _ := ParseSubject(m.Subject)
	src, _ := strconv.ParseUint(m.Header.Get(HdrSrcSeq), 10, 64)
	if node != mark.node || src != mark.src {
		return fmt.Sprintf("its message %d is %s's line at %d, where this machine had %s's at %d", mark.seq, node, src, mark.node, mark.src), nil
	}
	if mark.time != 0 && m.Time.UnixNano() != mark.time {
		// The same line, sent again after a restore to the sequence
		// it had: the messages before it may be others than this
		// machine took (a probe, 2026-12-07).
		return fmt.Sprintf("its message %d, %s's line at %d, was stored again at %s (this machine took it as stored at %s)",
			mark.seq, node, src, m.Time.UTC().Format(time.RFC3339Nano), time.Unix(0, mark.time).UTC().Format(time.RFC3339Nano)), nil
	}
	return "", nil
}

// forwarderMarkKey is the state key of the forwarder's mark: the last line
// it stored on PI_HUB, kept at the pace of its position.
const forwarderMarkKey = "forwarder.hub.mark"

// saveMark keeps the forwarder's mark, when it moved since it was kept
// (Position.OnSave).
func (f *Forwarder) saveMark(ctx context.Context) error {
	if f.mark == f.markSaved {
		return nil
	}
	if _, err := f.state.Put(ctx, forwarderMarkKey, []byte(f.mark.String())); err != nil {
		return fmt.Errorf("forwarder: keep its mark: %w", err)
	}
	f.markSaved = f.mark
	return nil
}

// rewound is the package's rewound for the forwarder's mark, the one in
// memory, else the one kept.
func (f *Forwarder) rewound(ctx context.Context) (string, error) {
	mark := f.mark
	if mark.seq == 0 {
		e, err := f.state.Get(ctx, forwarderMarkKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return "", nil
		case err != nil:
			return "", fmt.Errorf("forwarder: its mark: %w", err)
		}
		if mark, err = parseHubMark(string(e.Value())); err != nil {
			return "", fmt.Errorf("forwarder: %w", err)
		}
	}
	return rewound(ctx, f.hub, mark)
}
