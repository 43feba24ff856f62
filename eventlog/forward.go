package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Forwarder copies this node's PI_LOCAL into the hub's PI_HUB, exactly
// once: subject pi.evt.<node>.<sid> becomes pi.up.<node>.<sid>, payload and
// Pi-* headers unchanged, plus Pi-Src-Seq, the line's PI_LOCAL sequence.
//
// The hub is the checkpoint: the last message of each hub subject says how
// far that session was forwarded (its Pi-Src-Seq), and every publish states
// the hub subject sequence it expects to follow. The position kept in the
// local state bucket is only where to start reading PI_LOCAL; a stale one
// costs a re-check, never a duplicate.
type Forwarder struct {
	local  *Local
	nc     *nats.Conn
	domain string // the hub's JetStream domain
	hub    jetstream.JetStream
	pub    *Publisher
	state  jetstream.KeyValue
	logger *slog.Logger

	crypt      *Crypt // nil: lines go to the hub as they are
	hubStream  jetstream.Stream
	keysStream jetstream.Stream // PI_KEYS, for forwardcheck's key messages
	up         map[string]upPos // hub subject → position
	// mark is the last line stored on PI_HUB, markSaved the one in the
	// state bucket (hubmark.go).
	mark, markSaved hubMark
	forwarded       atomic.Int64
	through         atomic.Uint64 // PI_LOCAL's sequence up to which the hub holds everything it should
	waiting         atomic.Int64  // sessions held: their next line needs a batch the hub refuses
	link            *Link
	noBatch         bool          // the hub took no batch last time one was sent
	batchAgain      time.Time     // when to send a batch again after that
	hubLink         func() string // nil: the link is not watched (WatchLink)
	backlog         idleGate      // a backlog of PI_LOCAL is being forwarded (Idle)
	notOwnLast      atomic.Int64  // hub positions not taken: not this node's line (forwardcheck.go)
}

type upPos struct {
	hubSeq uint64 // last sequence on the hub subject
	srcSeq uint64 // its Pi-Src-Seq
}

// forwarderKey is the state bucket key of the PI_LOCAL read position.
const forwarderKey = "forwarder.position"

// NewForwarder forwards local to the hub domain over nc (the leaf node
// carries it) and keeps its read position in state.
func NewForwarder(local *Local, nc *nats.Conn, hubDomain string, state jetstream.KeyValue, logger *slog.Logger) (*Forwarder, error) {
	hub, err := jetstream.NewWithDomain(nc, hubDomain)
	if err != nil {
		return nil, fmt.Errorf("eventlog: forwarder: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{
		local: local, nc: nc, domain: hubDomain, hub: hub, state: state, logger: logger,
		pub:  NewPublisher(nc, hub, 10*time.Second),
		up:   make(map[string]upPos),
		link: NewLink(logger, "forwarding to the hub"),
	}, nil
}

// WatchLink makes the forwarder watch the leaf link to the hub through
// hubLink (embedded.Server.HubLink: "" while down, a new name once made
// again). A request to the hub waits for its reply behind whatever the
// uplink carries; while the link stays, it is on its way, so a batch is
// given as long as the link takes to carry it at carryRate, and when the
// link changes every request in flight is given up on at once: its reply,
// if any, was lost with the link. Without a watched link a batch is given
// the time of a one-megabit link (slowLink), and on a slower one it was
// given up on, its position asked for behind it, and sometimes sent again.
// Call it before Run.
func (f *Forwarder) WatchLink(hubLink func() string) {
	f.hubLink = hubLink
	f.pub.carry = carryRate
}

// Idle returns a channel that is closed while the forwarder has no backlog
// to forward: the last window it forwarded was the last PI_LOCAL held, or
// no pass is under way (the hub out of reach). Work of less weight (the
// search index's batches) waits on it, so that a machine's own sessions
// reach the hub first after a first read or an outage.
func (f *Forwarder) Idle() <-chan struct{} { return f.backlog.wait() }

// Encrypt makes the forwarder seal every line with c before it leaves for
// the hub, and forward nothing while c has no key. Call it before Run.
func (f *Forwarder) Encrypt(c *Crypt) { f.crypt = c }

// ForwarderStats are the forwarder's counters.
type ForwarderStats struct {
	Forwarded int64 `json:"forwarded"`
	Connected bool  `json:"hubReachable"`
	// Waiting is how many sessions wait for the hub to take an atomic
	// batch: each has a line of several chunks (an image) that only a
	// batch stores, and the hub refuses batches (docs/SECURITY.md).
	Waiting int64 `json:"sessionsWaitingForBatch"`
	// Through is PI_LOCAL's sequence up to which the hub holds every
	// message of this machine's; Unsent, the messages after it (set by
	// the daemon, which knows PI_LOCAL's last): 0 means everything written
	// here is on the hub, so the machine may go offline; -1 that the
	// store did not say (status's streamError says why).
	Through uint64 `json:"onHubThroughSeq"`
	Unsent  int64  `json:"unsentMessages"`
	// NotOwn counts the hub positions not taken because the last line
	// on a session's hub subject was not this node's (forwardcheck.go):
	// someone else writes on this node's subjects.
	NotOwn int64 `json:"hubLinesNotOwn,omitempty"`
}

// Stats returns the counters.
func (f *Forwarder) Stats() ForwarderStats {
	return ForwarderStats{Forwarded: f.forwarded.Load(), Connected: f.link.Load(), Waiting: f.waiting.Load(), Through: f.through.Load(), NotOwn: f.notOwnLast.Load()}
}

// Worked reports whether the forwarder's session with the hub was up once
// since it started.
func (f *Forwarder) Worked() bool { return f.link.Ever() }

// Run forwards until ctx ends. Failures (the hub unreachable, a stale
// position) are retried with backoff from the last durable position.
func (f *Forwarder) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if f.crypt != nil {
		wg.Go(func() { f.eraseKeys(ctx) })
	}
	RunSessions(ctx, f.link, &f.forwarded, f.session)
	wg.Wait()
	return nil
}

// HubKeys is PI_KEYS on hub for sealing, each call bounded: the
// forwarder's, and a test's that seals as a forwarder does.
func HubKeys(ctx context.Context, hub jetstream.JetStream) KeyHub {
	return KeyHub{
		Publish: func(subj string, body []byte) (uint64, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			ack, err := hub.Publish(ctx, subj, body, jetstream.WithExpectStream(KeysStream))
			if err != nil {
				return 0, fmt.Errorf("key message on %s: %w", KeysStream, err)
			}
			return ack.Sequence, nil
		},
		Subjects: func(filter string) ([]string, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			return KeySubjects(ctx, hub, filter)
		},
		Count: func() (uint64, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s, err := hub.Stream(ctx, KeysStream)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return 0, nil // a hub that never kept key messages
			}
			if err != nil {
				return 0, fmt.Errorf("key messages on %s: %w", KeysStream, err)
			}
			return s.CachedInfo().State.Msgs, nil
		},
	}
}

// KeySubjects lists the subjects of PI_KEYS matching filter that hold a
// message (a stream info with a subject filter).
func KeySubjects(ctx context.Context, js jetstream.JetStream, filter string) ([]string, error) {
	s, err := js.Stream(ctx, KeysStream)
	if err != nil {
		return nil, fmt.Errorf("key subjects on %s: %w", KeysStream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, fmt.Errorf("key subjects on %s: %s: %w", KeysStream, filter, err)
	}
	subjs := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		subjs = append(subjs, subj)
	}
	return subjs, nil
}

// eraseKeys destroys, on the hub, this node's key messages of the
// sessions erased here for another node's erase event (Crypt.EraseKeys),
// retrying until the hub takes each tombstone. What is still to do when
// the daemon stops is done after its restart (the state bucket keeps it:
// Crypt.UseState).
func (f *Forwarder) eraseKeys(ctx context.Context) {
	retry := time.Duration(0)
	for {
		toks, more := f.crypt.keyErasures()
		failed := false
		for _, tok := range toks {
			if err := f.crypt.eraseKeys(tok, HubKeys(ctx, f.hub)); err != nil {
				if ctx.Err() != nil {
					return
				}
				f.logger.Warn("destroying an erased session's key messages on the hub failed; retrying", "subject", KeySubject(f.crypt.node, tok), "err", err)
				failed = true
			}
		}
		var after <-chan time.Time
		if failed {
			retry = min(max(2*retry, time.Second), 30*time.Second)
			after = time.After(retry)
		} else {
			retry = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-more:
		case <-after:
		}
	}
}

func (f *Forwarder) loadPosition(ctx context.Context) (uint64, error) {
	e, err := f.state.Get(ctx, forwarderKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("forwarder position: %w", err)
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}

// session reads PI_LOCAL from the saved position and forwards until an
// error; it returns to Run, which starts a new one after a pause.
func (f *Forwarder) session(ctx context.Context) error {
	// What goes to the hub is given up on when the link changes; the
	// local consumer and the position are not.
	hctx := ctx
	if pos, err := f.loadPosition(ctx); err == nil {
		f.through.Store(pos) // known before the hub is: what status says is unsent
	}
	if f.hubLink != nil {
		if !waitLinked(ctx, f.hubLink) {
			return ctx.Err()
		}
		var stop func()
		hctx, stop = watchLink(ctx, f.hubLink)
		defer stop()
	}
	if err := f.checkHub(hctx); err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	pos, err := f.loadPosition(ctx)
	if err != nil {
		return err
	}
	f.through.Store(pos) // checkHub may have started it over
	// The hub answered (checkHub). With nothing to forward, say so now:
	// the first line forwarded may be hours away, and until then status
	// showed "forwarder no" beside a link that was up. With lines waiting,
	// the first window stored says it, so that a hub that answers but
	// refuses them (a full share) is not reported reachable.
	if info, err := f.local.Info(ctx); err == nil && info.LastSeq <= pos {
		f.link.Up()
	}
	saver := NewPosition(f.state, forwarderKey, pos)
	saver.OnSave = f.saveMark
	defer func() {
		if err := saver.SaveOnStop(ctx); err != nil {
			f.logger.Debug("forwarder: position not saved on stop; a restart re-checks from the one before", "err", err)
		}
	}()
	progress := newBacklog(f.logger, "forwarding a backlog to the hub")
	for {
		if pos, err = f.pass(ctx, hctx, pos, saver, progress); err != nil {
			if c := context.Cause(hctx); hctx.Err() != nil && ctx.Err() == nil {
				return fmt.Errorf("forwarder: %w", c)
			}
			return err
		}
	}
}

// pass reads PI_LOCAL after sequence from and forwards it, until an error,
// or until lines it held may go: then it returns where to read again.
//
// A session whose line needs a batch the hub refuses (errNoBatch) is held:
// the pass skips its lines from there on and the other sessions go on,
// beyond the window, while the position it saves stays before the held
// line (holdAt). Once the hub may take a batch again (batchAgain), the
// next pass reads again from holdAt; what the hub already holds is
// skipped there by its position, not sent twice.
func (f *Forwarder) pass(ctx, hctx context.Context, from uint64, saver *Position, progress *backlog) (uint64, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{LocalPrefix + "." + f.local.Node + ".>"}}
	if from > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from + 1
	}
	cons, err := f.local.js.OrderedConsumer(ctx, LocalStream, cfg)
	if err != nil {
		return 0, fmt.Errorf("forwarder: consumer: %w", err)
	}
	p, err := NewPump(cons, 1024, 8<<20)
	if err != nil {
		return 0, fmt.Errorf("forwarder: %w", err)
	}
	defer p.Stop()
	defer f.backlog.set(false) // nothing more is forwarded from this pass

	asm := NewAssemblers(false)
	// Hints from before this pass may name messages an erase removed
	// since; from here on, one is taken only right after the last handled.
	DrainHints(f.local.Stored())
	handled, done := from, from
	held := map[string]bool{} // hub subjects whose lines wait
	var holdAt uint64         // read again from here once they may go
	for {
		if len(held) > 0 && !time.Now().Before(f.batchAgain) {
			return holdAt, nil
		}
		// Block for the first message, then take what is already there;
		// while a position waits to be written, or held lines to be
		// tried again, wait no longer than that.
		wait, timed := saver.Due(time.Now())
		if again := time.Until(f.batchAgain); len(held) > 0 && (!timed || again < wait) {
			wait, timed = again, true
		}
		// The wait ends with the link too (hctx): a hub that came back
		// with a new store (rebuilt, restored) must be told this
		// machine's history now (checkHub, in the next session), not at
		// its next line, which may be days away.
		rctx, cancel := hctx, context.CancelFunc(func() {})
		if timed {
			rctx, cancel = context.WithTimeout(hctx, wait)
		}
		window, last, pending, err := f.read(rctx, p, asm, handled)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if err := saver.Save(ctx); err != nil {
				return 0, fmt.Errorf("forwarder: %w", err)
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		if last == handled {
			continue // only messages handed over already
		}
		handled = last
		if pending > 0 {
			f.backlog.set(true) // before the window goes: Idle says so while the hub has a part
		}
		wasHeld := len(held) > 0
		if err := f.forward(hctx, window, held); err != nil {
			return 0, err
		}
		f.waiting.Store(int64(len(held)))
		if !wasHeld && len(held) > 0 {
			// Everything up to done was on the hub before this window;
			// the held line is in it or after it.
			holdAt = done
		}
		n := 0
		for _, lines := range window {
			n += len(lines)
		}
		progress.update(n, pending, time.Now())
		f.backlog.set(pending > 0)
		// Everything up to last is on the hub, except split lines whose
		// chunks have not all arrived and held lines: start again before
		// those.
		done = last
		if s := asm.PendingStart(); s > 0 {
			done = min(done, s-1)
		}
		if len(held) > 0 {
			done = min(done, holdAt)
		}
		if err := saver.Note(ctx, done); err != nil {
			return 0, fmt.Errorf("forwarder: %w", err)
		}
		f.through.Store(done)
		f.link.Up()
	}
}

const forwardWindow = 1000

// read collects complete lines after sequence handled: it waits for the
// first message, then takes what has already arrived, up to a window,
// without waiting any longer. A live line the tailer has just stored comes
// handed over (Local.Stored), and again from the consumer, which read skips.
func (f *Forwarder) read(ctx context.Context, p *Pump, asm *Assemblers, handled uint64) (window map[string][]Line, last, pending uint64, err error) {
	window = map[string][]Line{}
	msgs, hinted, err := p.NextOr(ctx, forwardWindow, nil, f.local.Stored())
	if err != nil {
		return nil, 0, 0, fmt.Errorf("forwarder: read: %w", err)
	}
	last = handled
	for _, msg := range msgs {
		meta, err := msg.Metadata()
		if err != nil {
			return nil, 0, 0, fmt.Errorf("forwarder: read: %w", err)
		}
		seq := meta.Sequence.Stream
		take, stop := InOrder(seq, last, hinted)
		if stop {
			break
		}
		if !take {
			continue
		}
		pending = meta.NumPending
		last = seq
		subj := msg.Subject()
		ev, err := asm.Add(LocalStream, subj, last, msg.Headers(), msg.Data())
		if err != nil {
			// A message that is not ours to forward (it never came
			// from the tailer): skip it rather than stall every session.
			f.logger.Warn("forwarder: skipping an unreadable message", "subject", subj, "seq", last, "err", err)
			continue
		}
		if ev == nil {
			continue
		}
		window[subj] = append(window[subj], Line{
			Raw: ev.Raw, Sha: ev.Sha, ID: ev.ID, ParentID: ev.ParentID, Type: ev.Type,
			File: ev.File, Off: ev.Off, Op: ev.Op, SrcSeq: ev.Seq,
		})
	}
	return window, last, pending, nil
}

// forward publishes each session's lines to its hub subject after what the
// hub already holds, many sessions in one batch (forwardgroup.go). A
// session in held is skipped; one whose line needs a batch the hub refuses
// is added to held after its lines before that line.
func (f *Forwarder) forward(ctx context.Context, window map[string][]Line, held map[string]bool) error {
	if f.crypt != nil {
		if err := f.crypt.lookAtHub(HubKeys(ctx, f.hub).Count); err != nil {
			return fmt.Errorf("forwarder: whether the team encrypts: %w", err)
		}
	}
	var sends []send
	for subj, lines := range window {
		_, sid, err := ParseSubject(subj)
		if err != nil {
			continue
		}
		up, tok := UpSubject(f.local.Node, sid), "" // tok: the sealed session's token
		if f.crypt != nil {
			if up, tok, err = f.crypt.subject(sid); err != nil {
				return fmt.Errorf("forwarder: %w", err)
			}
		}
		if held[up] {
			continue
		}
		pos, ok := f.up[up]
		if !ok {
			if pos, err = f.hubPosition(ctx, up, subj, tok); err != nil {
				return err
			}
			f.up[up] = pos
		}
		i := 0
		for i < len(lines) && lines[i].SrcSeq <= pos.srcSeq {
			i++ // already on the hub
		}
		if i == len(lines) {
			continue
		}
		out := lines[i:]
		if tok != "" {
			out = make([]Line, len(lines)-i)
			for j := range out {
				if _, out[j], err = f.crypt.seal(sid, &lines[i+j], HubKeys(ctx, f.hub)); err != nil {
					return fmt.Errorf("forwarder: %w", err)
				}
			}
		}
		sends = append(sends, send{up: up, lines: lines[i:], out: out})
	}
	return f.sendAll(ctx, sends, held)
}

// sent records that the first n lines of s are on the hub, the last at
// sequence hubSeq, and handles err, why the rest are not: a session whose
// line needs a batch the hub refuses is held, any other error ends the
// window.
func (f *Forwarder) sent(s *send, hubSeq uint64, n int, err error, held map[string]bool) error {
	if n > 0 {
		f.up[s.up] = upPos{hubSeq: hubSeq, srcSeq: s.lines[n-1].SrcSeq}
		f.mark = hubMark{seq: hubSeq, node: f.local.Node, src: s.lines[n-1].SrcSeq}
		f.forwarded.Add(int64(n))
	}
	switch {
	case errors.Is(err, errNoBatch):
		// The other sessions need not wait for this one.
		held[s.up] = true
		f.logger.Debug("forwarder: a session's lines wait for the hub to take a batch", "subject", s.up, "err", err)
	case err != nil:
		delete(f.up, s.up) // re-read the hub's position next time
		if isShareFull(err) {
			return fmt.Errorf("forwarder: %s: %w (%s)", s.up, err, shareFullHint)
		}
		return fmt.Errorf("forwarder: %s: %w", s.up, err)
	}
	return nil
}

// shareFullHint follows a line the hub refused for a full share: the team's
// nodes share it, so one can fill it for all, and only the hub's operator
// can make room.
const shareFullHint = "the team's share of the hub's store is full: its operator can raise PISYNC_HUB_TEAM_MAX_STORE, or find a node that filled it, `pisyncd hub usage`, remove it and erase its lines, `pisyncd hub remove-node NODE --erase`: docs/HUB.md"

// publish stores out on the hub subject up after its sequence last, as
// Publisher.Publish does, and returns the same. When the hub takes no batch
// (PI_HUB has a fixed number of open batches for every node together, and
// any node can hold them all open with a message each, never finished; a
// slow link can outlast one too), lines of one message go one by one (a
// request each), which needs no batch, and a line of several chunks waits
// (errNoBatch); the next batch is sent batchRetry later, not at every
// retry, which sent an image's bytes again each time.
func (f *Forwarder) publish(ctx context.Context, up string, last uint64, out []Line) (uint64, int, error) {
	if needsBatch(out) && f.refusesBatches() {
		return f.publishWithoutBatch(ctx, up, last, out, 0, errors.New("the hub refused the last batch"))
	}
	seq, n, err := f.pub.Publish(ctx, up, last, out)
	switch {
	case err != nil && isBatchRefused(err):
		f.batchRefused(err)
		return f.publishWithoutBatch(ctx, up, seq, out, n, err)
	case err == nil && needsBatch(out):
		f.batchTaken()
	}
	return seq, n, err
}

// batchRefused notes that the hub refused a batch (err says how): lines go
// one by one, and the next batch is sent batchRetry later.
func (f *Forwarder) batchRefused(err error) {
	f.batchAgain = time.Now().Add(batchRetry)
	if !f.noBatch {
		f.noBatch = true
		f.logger.Warn("forwarder: the hub takes no batch; lines go one by one, and a line of several chunks waits",
			"err", err, "hint", "the hub refuses a batch while PI_HUB has as many open as nats-server allows, which one node can hold (docs/SECURITY.md), and drops one whose messages come too slowly")
	}
}

// refusesBatches reports whether the hub refused the last batch sent, less
// than batchRetry ago: until then nothing is sent as a batch.
func (f *Forwarder) refusesBatches() bool {
	return f.noBatch && time.Now().Before(f.batchAgain)
}

// batchTaken notes that the hub took a batch.
func (f *Forwarder) batchTaken() {
	if f.noBatch {
		f.noBatch = false
		f.logger.Info("forwarder: the hub takes batches again")
	}
}

// publishWithoutBatch publishes out[done:] one by one after last, up to a
// line of several chunks, which waits because the hub refused a batch
// (refused says how); it returns as publish does.
func (f *Forwarder) publishWithoutBatch(ctx context.Context, up string, last uint64, out []Line, done int, refused error) (uint64, int, error) {
	seq, n, err := f.pub.publishSingly(ctx, up, last, out[done:])
	if n += done; err == nil && n < len(out) {
		err = fmt.Errorf("%w: a line of %d chunks waits (%v)", errNoBatch, out[n].Chunks(), refused)
	}
	return seq, n, err
}

// errNoBatch ends a session's forwarding for now at a line that needs a
// batch, which the hub does not take.
var errNoBatch = errors.New("the hub takes no batch")

// batchRetry is how long after a batch the hub refused the forwarder sends
// the next: the hub keeps an unfinished batch open for its batch timeout
// (a minute), so one that holds them all lapses within that.
const batchRetry = 15 * time.Second
