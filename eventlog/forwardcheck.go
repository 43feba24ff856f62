package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/seal"
)

// The hub is the forwarder's checkpoint: the Pi-Src-Seq of a session's
// last message on its hub subject says how far the session was forwarded.
// That header is not signed. Whoever can write the subject besides the
// node (the hub's operator; a hub store restored from another time) could
// claim a position past the truth, and the forwarder would pass over the
// node's next lines as on the hub while status said everything was there.
// So a claim is taken only from the node's own message: the PI_LOCAL
// message it names is on the session's local subject, and, for a sealed
// session, the message's envelope opens at that position (the seal binds
// it, so only a holder of the team key who may write the subject can make
// one). Otherwise the session's lines are forwarded again after it: a
// machine that copied them already passes them over, and nothing is lost.

// hubPosition reads the last message of hub subject up, the session whose
// PI_LOCAL subject is local (tok its token when it is sealed, else ""),
// and takes its Pi-Src-Seq only when the message is this node's own.
func (f *Forwarder) hubPosition(ctx context.Context, up, local, tok string) (upPos, error) {
	// Every call to the hub is bounded: a request whose reply never comes
	// (the link dropped mid-request) must not stall forwarding forever.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if f.hubStream == nil {
		s, err := f.hub.Stream(ctx, HubStream)
		if err != nil {
			return upPos{}, fmt.Errorf("forwarder: hub stream: %w", err)
		}
		f.hubStream = s
	}
	seq, m, err := LastSeq(ctx, f.hubStream, up)
	if err != nil {
		// Looked up again next time: the stream's info says how to read
		// it (a hub upgraded meanwhile answers no direct get).
		f.hubStream = nil
		return upPos{}, err
	}
	if m == nil {
		return upPos{hubSeq: seq}, nil
	}
	src, _ := strconv.ParseUint(m.Header.Get(HdrSrcSeq), 10, 64)
	why, err := f.notOwn(ctx, local, tok, src, m)
	if err != nil {
		return upPos{}, err
	}
	if why != "" {
		f.notOwnLast.Add(1)
		f.logger.Warn("forwarder: the hub's last line of a session is not one this node stored there; the session's lines are forwarded again after it",
			"subject", up, "hub_seq", seq, "why", why,
			"hint", "someone other than this node wrote on its hub subject (the hub's operator, or a hub restored from a backup); other machines pass over what they hold already")
		return upPos{hubSeq: seq}, nil
	}
	return upPos{hubSeq: seq, srcSeq: src}, nil
}

// notOwn says why m, the last message on a hub subject of the session
// whose PI_LOCAL subject is local, is not this node's line at PI_LOCAL
// position src ("" when it is). err is a failure to find out.
func (f *Forwarder) notOwn(ctx context.Context, local, tok string, src uint64, m *jetstream.RawStreamMsg) (why string, err error) {
	if src == 0 {
		return "it has no " + HdrSrcSeq, nil
	}
	lm, err := f.local.stream.GetMsg(ctx, src)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Sprintf("its %s names %s message %d, which is not there", HdrSrcSeq, LocalStream, src), nil
	case err != nil:
		return "", fmt.Errorf("forwarder: the hub's position: %s message %d: %w", LocalStream, src, err)
	case lm.Subject != local:
		return fmt.Sprintf("its %s names %s message %d, which is another session's", HdrSrcSeq, LocalStream, src), nil
	}
	if tok == "" {
		return "", nil
	}
	i, n, err := ParseChunk(m.Header.Get(HdrChunk))
	if err != nil {
		return err.Error(), nil
	}
	err = f.crypt.check(tok, src, m.Data, i, n)
	if h, ok := needKey(err); ok {
		km, gerr := f.keyMessage(ctx, h, KeySubject(f.local.Node, tok)+".>")
		switch {
		case gerr != nil:
			return "", fmt.Errorf("forwarder: the hub's position: key message %d: %w", h, gerr)
		case km == nil || km.Sequence != h || len(km.Data) == 0:
			return fmt.Sprintf("it names key message %d, which is not one of this node's for the session on %s", h, KeysStream), nil
		}
		if err = f.crypt.learn(tok, h, km.Data); err == nil {
			err = f.crypt.check(tok, src, m.Data, i, n)
		}
	}
	switch {
	case errors.Is(err, seal.ErrOpen), errors.Is(err, seal.ErrMoved):
		return fmt.Sprintf("its envelope does not open at %s %d: %v", HdrSrcSeq, src, err), nil
	case err != nil:
		return "", fmt.Errorf("forwarder: the hub's position: %w", err)
	}
	return "", nil
}

// keyMessage reads the first message of the hub's PI_KEYS at or after
// sequence h on a subject matching filter, looking the stream up once
// (again after a failure): after a restart every session whose position
// is checked needs one.
func (f *Forwarder) keyMessage(ctx context.Context, h uint64, filter string) (*jetstream.RawStreamMsg, error) {
	if f.keysStream == nil {
		s, err := f.hub.Stream(ctx, KeysStream)
		if err != nil {
			return nil, err
		}
		f.keysStream = s
	}
	m, err := streamNext(ctx, f.keysStream, h, filter)
	if err != nil {
		f.keysStream = nil
	}
	return m, err
}
