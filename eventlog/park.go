package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/seal"
)

// Parking. A sealed line whose team key this machine lacks (a key rotated
// in after this machine's copy of the keyring, or a key of a teammate's
// own making) cannot be opened, so it cannot be judged. The downloader
// used to stop at it and copy nothing after it, from anyone, until the
// key came: one line sealed under a key of a node's own stalled every
// workstation of the team for good. Now the line's hub subject (one
// session of one node) is held: the line and every later message of that
// subject are stored as they came in PI_PARK, in hub order, and every
// other subject is copied on. Once the key is here, the held subject's
// messages are framed and admitted from PI_PARK, in order, exactly as if
// they came from the hub then, and stored in PI_ALL before anything of
// that subject the hub sends after them.
//
// PI_PARK holds only what the hub sent, still sealed; the downloader is
// its only writer, and nothing in it is trusted: a parked line goes
// through the same framing and admission as any other.
const (
	ParkStream = "PI_PARK"
	ParkPrefix = "pi.park" // PI_PARK: pi.park.<node>.<token>, a held hub subject pi.up.<node>.<token>
)

// HdrHubTime is, on PI_PARK, when the hub stored the message: the
// admission point judges a released line by it, as by a line's time on
// the hub (its quotas are per hour of the hub's clock).
const HdrHubTime = "Pi-Hub-Time"

// parkMaxBytes bounds PI_PARK. Full, it takes no more, and the copy waits
// at the line as it did before parking (nothing is passed over unread):
// what a node can make a workstation hold is bounded by this, not only by
// the hub's share of its team. The bound is kept here, not as the stream's
// MaxBytes, which nats-server reserves out of the store's whole limit
// (PISYNC_MAX_STORE) when the stream is made, and refuses to make beyond
// it.
var parkMaxBytes uint64 = 1 << 30 // a variable for tests

// errParkFull: PI_PARK holds parkMaxBytes already.
var errParkFull = errors.New("it holds as much as it may (1 GiB) already")

// parkNodeBytes is one node's share of PI_PARK. Past it, a line of that
// node that would be held is passed over (RejectHeldLimit) instead: one
// node alone (a teammate sealing a flood under a key of its own) cannot
// fill PI_PARK, which would make the copy wait for everyone; it takes
// four. A team's own rotation stays far inside it.
var parkNodeBytes uint64 = 256 << 20 // a variable for tests

// ParkStreamConfig is PI_PARK on a workstation.
func ParkStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              ParkStream,
		Description:       "pisyncd: sealed lines from the hub held until this machine has their team key",
		Subjects:          []string{ParkPrefix + ".>"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardNew,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        MaxMsgSize,
	}
}

// parkSubject is the PI_PARK subject of hub subject subj (pi.up.<node>.<token>).
func parkSubject(subj string) string { return ParkPrefix + subj[len(UpPrefix):] }

// hubSubject reverses parkSubject.
func hubSubject(park string) string { return UpPrefix + park[len(ParkPrefix):] }

// maxHeldPerNode bounds the hub subjects of one node held at once. Past
// it, a line of that node that would start holding one more is passed
// over (RejectHeldLimit): a node sealing each line of its own under a key
// of its own cannot make a workstation keep a map entry and a consumer's
// work per line, and a team's own rotation stays far inside it.
var maxHeldPerNode = 1000 // a variable for tests

// parking is PI_PARK and the hub subjects held in it. It belongs to the
// downloader's framing stage; the storing stage only releases messages
// from the stream.
type parking struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	// held: the hub subjects with lines in PI_PARK, and the team key the
	// first of them waits for ("" when unknown, or when it waits for its
	// key message to reach the hub server that answered).
	held   map[string]string
	byNode map[string]int // held subjects per origin node
	// nodeBytes: about what PI_PARK holds of each origin node
	// (parkedCost of each message), counted from its messages at open.
	nodeBytes map[string]uint64
	// changed: held changed since the downloader last showed it (Stats).
	changed bool
	// next: the PI_PARK sequence a held subject is read from again, past
	// what was released of it already (its messages before are let go
	// of only once the storing stage has stored what they hold).
	next map[string]uint64
}

// openParking reads which hub subjects PI_PARK holds lines of. The stream
// is made when a first line is held: most workstations never hold one.
func openParking(ctx context.Context, js jetstream.JetStream) (*parking, error) {
	p := &parking{js: js, held: map[string]string{}, byNode: map[string]int{}, nodeBytes: map[string]uint64{}, next: map[string]uint64{}, changed: true}
	s, err := js.Stream(ctx, ParkStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: %s: %w", ParkStream, err)
	}
	p.stream = s
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(ParkPrefix+".>"))
	if err != nil {
		return nil, fmt.Errorf("eventlog: %s: %w", ParkStream, err)
	}
	for subj := range info.State.Subjects {
		p.hold(hubSubject(subj), "")
	}
	if info.State.Msgs > 0 {
		if err := p.countNodes(ctx); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// countNodes reads what PI_PARK holds of each node from its messages'
// headers alone (the server sends a body's size, not the body), so that
// each node's share, and with them PI_PARK's bound, outlive a restart.
func (p *parking) countNodes(ctx context.Context) error {
	cons, err := p.js.OrderedConsumer(ctx, ParkStream, jetstream.OrderedConsumerConfig{HeadersOnly: true, InactiveThreshold: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("eventlog: count %s: %w", ParkStream, err)
	}
	defer deleteConsumer(p.js, ParkStream, cons)
	for {
		batch, err := cons.FetchNoWait(1024)
		if err != nil {
			return fmt.Errorf("eventlog: count %s: %w", ParkStream, err)
		}
		var pending uint64
		n := 0
		for m := range batch.Messages() {
			n++
			size, _ := strconv.Atoi(m.Headers().Get(nats.MsgSize))
			node, _, _ := ParseSubject(hubSubject(m.Subject()))
			p.nodeBytes[node] += parkedCost(size, m.Subject())
			if meta, err := m.Metadata(); err == nil {
				pending = meta.NumPending
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("eventlog: count %s: %w", ParkStream, err)
		}
		if n == 0 || pending == 0 {
			return nil
		}
	}
}

// free counts n bytes of hub subject subj's messages as held no more: a
// release framed them, and the storing stage purges them once stored.
func (p *parking) free(subj string, n uint64) {
	node, _, _ := ParseSubject(subj)
	if p.nodeBytes[node] -= min(n, p.nodeBytes[node]); p.nodeBytes[node] == 0 {
		delete(p.nodeBytes, node)
	}
}

// bytes is about what PI_PARK holds: every node's share together.
func (p *parking) bytes() uint64 {
	var n uint64
	for _, b := range p.nodeBytes {
		n += b
	}
	return n
}

// parkedCost is about what PI_PARK takes to store a message of size bytes
// on subject subj.
func parkedCost(size int, subj string) uint64 { return uint64(size + len(subj) + 128) }

// overShare reports whether holding msgs, lines of node, would take node
// past its share of PI_PARK.
func (p *parking) overShare(node string, msgs []jetstream.Msg) bool {
	n := p.nodeBytes[node]
	for _, m := range msgs {
		n += parkedCost(len(m.Data()), parkSubject(m.Subject()))
	}
	return n > parkNodeBytes
}

// hold records that hub subject subj is held, waiting for team key kid.
func (p *parking) hold(subj, kid string) {
	if was, ok := p.held[subj]; !ok {
		node, _, _ := ParseSubject(subj)
		p.byNode[node]++
	} else if was == kid {
		return
	}
	p.held[subj] = kid
	p.changed = true
}

// unhold records that nothing of hub subject subj is held any more.
func (p *parking) unhold(subj string) {
	if _, ok := p.held[subj]; !ok {
		return
	}
	delete(p.held, subj)
	delete(p.next, subj)
	p.changed = true
	node, _, _ := ParseSubject(subj)
	if p.byNode[node]--; p.byNode[node] <= 0 {
		delete(p.byNode, node)
	}
}

// full reports whether node holds as many subjects as it may.
func (p *parking) full(node string) bool { return p.byNode[node] >= maxHeldPerNode }

// subjects returns, sorted, the held hub subjects whose awaited key
// (parking.held) keep accepts.
func (p *parking) subjects(keep func(kid string) bool) []string {
	var out []string
	for s, kid := range p.held {
		if keep(kid) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// keys returns the team keys the held subjects wait for, sorted, each
// once.
func (p *parking) keys() []string {
	var out []string
	for _, kid := range p.held {
		if kid != "" && !slices.Contains(out, kid) {
			out = append(out, kid)
		}
	}
	slices.Sort(out)
	return out
}

// nodes returns the origin nodes of the held subjects, sorted.
func (p *parking) nodes() []string {
	var out []string
	for n, c := range p.byNode {
		if c > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// park stores hub messages msgs (all of one hub subject, in hub order) in
// PI_PARK and holds their subject, waiting for team key kid. An error
// means they are not all stored: the copy must not pass over them.
func (p *parking) park(ctx context.Context, msgs []jetstream.Msg, kid string) error {
	if p.stream == nil {
		s, err := EnsureStream(ctx, p.js, ParkStreamConfig())
		if err != nil {
			return fmt.Errorf("downloader: hold a sealed line: %w", err)
		}
		p.stream = s
	}
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("downloader: park: %w", err)
		}
		pm := nats.NewMsg(parkSubject(m.Subject()))
		copyHeaders(pm.Header, m.Headers())
		pm.Header.Set(HdrHubSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
		pm.Header.Set(HdrHubTime, strconv.FormatInt(meta.Timestamp.UnixNano(), 10))
		pm.Data = m.Data()
		if p.bytes() >= parkMaxBytes {
			return fmt.Errorf("downloader: hold a sealed line of %s in %s: %w", m.Subject(), ParkStream, errParkFull)
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = p.js.PublishMsg(rctx, pm, jetstream.WithExpectStream(ParkStream))
		cancel()
		if err != nil {
			return fmt.Errorf("downloader: hold a sealed line of %s in %s: %w", m.Subject(), ParkStream, err)
		}
		node, _, _ := ParseSubject(m.Subject())
		p.nodeBytes[node] += parkedCost(len(pm.Data), pm.Subject)
		if _, ok := p.held[m.Subject()]; !ok {
			p.hold(m.Subject(), kid)
		}
	}
	return nil
}

// read returns up to n messages of held hub subject subj from PI_PARK
// sequence from on, as the hub sent them (parkedMsg), and the PI_PARK
// sequence of each.
func (p *parking) read(ctx context.Context, subj string, from uint64, n int) ([]jetstream.Msg, []uint64, error) {
	cons, err := p.js.OrderedConsumer(ctx, ParkStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{parkSubject(subj)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    max(from, 1),
		// Gone as the read returns (deleteConsumer), or else at this:
		// left for nats.go's default of five minutes, a release of a
		// thousand held sessions filled the stream's thousand consumers,
		// and copying stopped for minutes at a time (a probe, 2026-12-07).
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("downloader: read %s: %w", ParkStream, err)
	}
	defer deleteConsumer(p.js, ParkStream, cons)
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		return nil, nil, fmt.Errorf("downloader: read %s: %w", ParkStream, err)
	}
	var msgs []jetstream.Msg
	var seqs []uint64
	for m := range batch.Messages() {
		meta, err := m.Metadata()
		if err != nil {
			return nil, nil, fmt.Errorf("downloader: read %s: %w", ParkStream, err)
		}
		pm, err := newParkedMsg(m)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, pm)
		seqs = append(seqs, meta.Sequence.Stream)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, nil, fmt.Errorf("downloader: read %s: %w", ParkStream, err)
	}
	return msgs, seqs, nil
}

// release removes from PI_PARK the messages of hub subject subj before
// PI_PARK sequence upto, once what they hold is stored in PI_ALL.
func (p *parking) release(ctx context.Context, subj string, upto uint64) error {
	if err := p.stream.Purge(ctx, jetstream.WithPurgeSubject(parkSubject(subj)), jetstream.WithPurgeSequence(upto)); err != nil {
		return fmt.Errorf("downloader: release %s from %s: %w", subj, ParkStream, err)
	}
	return nil
}

// dropParked empties PI_PARK when the hub's PI_HUB was replaced: what it
// holds names the old stream's sequences, and the new one gets those
// lines again from their origins' forwarders.
func dropParked(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, ParkStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err == nil {
		err = s.Purge(ctx)
	}
	if err != nil {
		return fmt.Errorf("downloader: empty %s for a new hub: %w", ParkStream, err)
	}
	return nil
}

// parkedMsg is a message of PI_PARK seen as the hub message it was: its
// hub subject, sequence and time. It is never acknowledged.
type parkedMsg struct {
	jetstream.Msg
	subj string
	meta jetstream.MsgMetadata
	hdr  nats.Header
}

func newParkedMsg(m jetstream.Msg) (*parkedMsg, error) {
	h := m.Headers()
	seq, err := strconv.ParseUint(h.Get(HdrHubSeq), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("downloader: a message of %s without its hub sequence", ParkStream)
	}
	ns, err := strconv.ParseInt(h.Get(HdrHubTime), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("downloader: a message of %s without its hub time", ParkStream)
	}
	if !strings.HasPrefix(m.Subject(), ParkPrefix+".") {
		return nil, fmt.Errorf("downloader: %q is no subject of %s", m.Subject(), ParkStream)
	}
	hdr := nats.Header{}
	copyHeaders(hdr, h)
	delete(hdr, HdrHubSeq)
	delete(hdr, HdrHubTime)
	pm := &parkedMsg{Msg: m, subj: hubSubject(m.Subject()), hdr: hdr}
	pm.meta.Sequence.Stream = seq
	pm.meta.Timestamp = time.Unix(0, ns)
	pm.meta.Stream = HubStream
	return pm, nil
}

func (m *parkedMsg) Subject() string                           { return m.subj }
func (m *parkedMsg) Headers() nats.Header                      { return m.hdr }
func (m *parkedMsg) Metadata() (*jetstream.MsgMetadata, error) { meta := m.meta; return &meta, nil }

// released says how far a release of one held subject got.
type released int

const (
	releasedAll   released = iota // every parked line framed: the subject is held no more
	releasedMore                  // a batch's worth framed; more are parked
	releasedWaits                 // stopped at a line whose key is still not here
)

// parkBatch is how many parked messages one read of PI_PARK takes: at
// most 8 MiB of chunks.
const parkBatch = 32

// releaseSubject frames the parked messages of held hub subject subj from
// where the last release of it ended (parking.next), in order, as f would
// have framed them from the hub, up to about batchBytes of admitted lines.
// It returns those lines, the PI_PARK sequence before which every parked
// message of subj was framed (0: none), how far it got, and, when it
// stopped at a line still without its key, the team key that line waits
// for ("" for a key message not on the hub's server yet).
//
// Its framer is one of its own (a line in the making of f's is not
// disturbed), without parking (a line still without its key stops it),
// sharing f's knowledge of each session's last position and erase.
func (f *framer) releaseSubject(ctx context.Context, subj string) (lines [][]*nats.Msg, upto uint64, how released, kid string, err error) {
	rf := &framer{d: f.d, maxLine: f.maxLine, held: f.held, floor: f.floor, releasing: true}
	var cost, framed uint64 // PI_PARK's bytes read, and of them those before upto
	defer func() {
		f.held, f.floor = rf.held, rf.floor
		if err == nil {
			f.park.free(subj, framed)
		}
	}()
	size := 0
	for from := max(f.park.next[subj], 1); ; {
		msgs, seqs, err := f.park.read(ctx, subj, from, parkBatch)
		if err != nil {
			return nil, 0, 0, "", err
		}
		if len(msgs) == 0 {
			// What is parked ends with a line cut short (its chunks
			// partly held when the daemon stopped): passed over.
			rf.breakRun()
			if from > 1 {
				upto, framed = from, cost
			}
			return lines, upto, releasedAll, "", nil
		}
		for i, m := range msgs {
			cost += parkedCost(len(m.Data()), parkSubject(subj))
			meta, _ := m.Metadata()
			line, err := rf.add(ctx, m, meta)
			if errors.Is(err, seal.ErrNoKey) {
				// Up to the line that waits, which starts right after
				// the last one framed.
				return lines, upto, releasedWaits, keyID(err), nil
			}
			if err != nil {
				return nil, 0, 0, "", err
			}
			for _, lm := range line {
				size += len(lm.Data)
			}
			if line != nil {
				lines = append(lines, line)
			}
			if len(rf.run) == 0 {
				upto, framed = seqs[i]+1, cost
				if size >= batchBytes {
					return lines, upto, releasedMore, "", nil
				}
			}
		}
		from = seqs[len(seqs)-1] + 1
	}
}
