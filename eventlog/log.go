package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Local is this node's own event log: PI_LOCAL, the subjects pi.evt.<node>.*.
type Local struct {
	Node   string
	js     jetstream.JetStream
	stream jetstream.Stream
	pub    *Publisher
}

// OpenLocal makes sure PI_LOCAL exists and returns the node's log on it.
func OpenLocal(ctx context.Context, nc *nats.Conn, node string) (*Local, error) {
	if !ValidNodeID(node) {
		return nil, fmt.Errorf("eventlog: invalid node id %q", node)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	s, err := EnsureStream(ctx, js, LocalStreamConfig())
	if err != nil {
		return nil, err
	}
	pub := NewPublisher(nc, js, 30*time.Second)
	pub.stored = newHints(LocalStream, true)
	return &Local{Node: node, js: js, stream: s, pub: pub}, nil
}

// Owner returns the node whose lines PI_LOCAL holds: l.Node when it holds
// any of l.Node's, else the node of its last message, else "" (it holds
// none). A store holds one node's lines only, so another owner means the
// node id was changed under it (a damaged or edited node-id file), and a
// tailer would publish every session file again under the new id.
func (l *Local) Owner(ctx context.Context) (string, error) {
	own, _, err := LastSeq(ctx, l.stream, LocalPrefix+"."+l.Node+".>")
	if err != nil {
		return "", err
	}
	if own > 0 {
		return l.Node, nil
	}
	_, last, err := LastSeq(ctx, l.stream, LocalPrefix+".>")
	if err != nil || last == nil {
		return "", err
	}
	// The node is read even where the session token does not decode.
	node, _, _ := ParseSubject(last.Subject)
	return node, nil
}

// Stored hands the lines the tailer has just stored one by one (a live
// append) to one reader in this process, the forwarder, so that a line
// goes on to the hub without waiting for PI_LOCAL's consumer to deliver it
// (see hints). Batches are not handed over.
func (l *Local) Stored() <-chan []jetstream.Msg { return l.pub.stored.c }

// JetStream returns the JetStream context the log uses.
func (l *Local) JetStream() jetstream.JetStream { return l.js }

// Stream returns PI_LOCAL.
func (l *Local) Stream() jetstream.Stream { return l.stream }

// Subject is the session's subject on this node.
func (l *Local) Subject(sid string) string { return LocalSubject(l.Node, sid) }

// Last returns the session's last subject sequence and the metadata of its
// last stored line (nil when the subject is empty).
func (l *Local) Last(ctx context.Context, sid string) (uint64, *Event, error) {
	subj := l.Subject(sid)
	seq, m, err := LastSeq(ctx, l.stream, subj)
	if err != nil || m == nil {
		return seq, nil, err
	}
	ev, err := newEvent(LocalStream, subj, seq, m.Header)
	if ev != nil {
		ev.Time = m.Time
	}
	return seq, ev, err
}

// First returns the metadata of the session's first stored line, nil when
// the subject is empty.
func (l *Local) First(ctx context.Context, sid string) (*Event, error) {
	subj := l.Subject(sid)
	m, err := l.stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subj))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: first message of %s: %w", subj, err)
	}
	return newEvent(LocalStream, subj, m.Sequence, m.Header)
}

// Scan calls fn for every stored line of the session up to sequence upTo
// (0: up to the last), headers only unless withData.
func (l *Local) Scan(ctx context.Context, sid string, upTo uint64, withData bool, fn func(*Event) error) error {
	return ReadSubject(ctx, l.js, l.stream, l.Subject(sid), upTo, !withData, fn)
}

// Publish appends lines to the session's subject after sequence last.
func (l *Local) Publish(ctx context.Context, sid string, last uint64, lines []Line) (uint64, int, error) {
	return l.pub.Publish(ctx, l.Subject(sid), last, lines)
}

// Info is the stream's state for status reports.
type Info struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
	Subjects uint64 `json:"subjects"`
}

// Held is the sessions whose subject in PI_LOCAL holds a message: one
// request (paged by the server past 100,000 subjects) instead of one per
// session.
func (l *Local) Held(ctx context.Context) (map[string]struct{}, error) {
	si, err := l.stream.Info(ctx, jetstream.WithSubjectFilter(LocalPrefix+"."+l.Node+".>"))
	if err != nil {
		return nil, fmt.Errorf("eventlog: subjects of %s: %w", LocalStream, err)
	}
	held := make(map[string]struct{}, len(si.State.Subjects))
	for subj := range si.State.Subjects {
		_, sid, err := ParseSubject(subj)
		if err != nil {
			return nil, fmt.Errorf("eventlog: subjects of %s: %w", LocalStream, err)
		}
		held[sid] = struct{}{}
	}
	return held, nil
}

// Info reads PI_LOCAL's current state.
func (l *Local) Info(ctx context.Context) (Info, error) {
	si, err := l.stream.Info(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("eventlog: stream info: %w", err)
	}
	st := si.State
	return Info{Messages: st.Msgs, Bytes: st.Bytes, FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Subjects: uint64(st.NumSubjects)}, nil
}

// After bounds how many messages PI_LOCAL holds after sequence seq, of
// info, its state: none when no message follows seq (an erase may have
// taken the last ones before the forwarder read them, which the
// sequences alone still counted), else the sequences from the first
// message that follows to the last, at most the messages it holds (more
// than it holds there only where an erase took some of them).
func (l *Local) After(ctx context.Context, seq uint64, info Info) (uint64, error) {
	if info.LastSeq <= seq || info.Messages == 0 {
		return 0, nil
	}
	first, err := l.stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(">"))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog: the message after %d: %w", seq, err)
	}
	return min(info.LastSeq-min(first.Sequence, info.LastSeq)+1, info.Messages), nil
}
