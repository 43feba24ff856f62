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

	"github.com/pisyncd/pisyncd/seal"
)

// HdrHubSeq is, on PI_ALL, the message's sequence in the hub's PI_HUB.
const HdrHubSeq = "Pi-Hub-Seq"

// HdrKeyFloor is set on a sealed erase event in PI_ALL: the handle of its
// key message, drawn after every data key its session's earlier lines
// name. A sealed line of the session naming an older one is a copy of an
// erased line (framer.admit).
const HdrKeyFloor = "Pi-Key-Floor"

// Downloader copies the hub's PI_HUB into this node's PI_ALL, in hub order,
// exactly once, admitting each line first: it is the boundary where
// other machines' events enter this one, so nothing that its Admitter
// rejects is ever stored here. PI_ALL is its own checkpoint: its last
// message says which hub sequence was copied last, and every write states
// the PI_ALL sequence it expects to follow, so a restart, a lost reply or a
// second downloader can never store a message twice.
type Downloader struct {
	nc     *nats.Conn
	domain string // the hub's JetStream domain
	local  jetstream.JetStream
	hub    jetstream.JetStream
	all    *All
	opts   DownloaderOptions
	logger *slog.Logger

	copied, rejected atomic.Int64
	held             atomic.Int64             // hub subjects held in PI_PARK (park.go)
	heldFor          atomic.Pointer[[]string] // the team keys they wait for
	heldFrom         atomic.Pointer[[]string] // the nodes whose sessions they are
	link             *Link
	backlog          idleGate // a backlog the hub said is still to come
	watched          bool     // opts.HubLink was given
	// rebuilt is the PI_ALL sequence up to which PI_ALL was copied from a
	// PI_HUB since replaced (hubid.go), 0 if none: read by position, used
	// by the framer it starts after.
	rebuilt uint64
	first   firstCopy // firstcopy.go
}

// Admitter is the admission point for other machines' events.
type Admitter interface {
	// Admit returns nil to admit ev, an error wrapping ErrRejected to
	// pass it over, another error when it cannot decide now. at is when
	// the hub stored the event.
	Admit(ctx context.Context, ev *Event, at time.Time) error
	// Reject counts a message the downloader passed over itself: a
	// broken chunk run, a subject that names no session.
	Reject(node, sid, reason, detail string)
	// ErasedLines says that node's lines of session sid were passed over
	// as erased (their key messages gone from the hub): they count as its
	// lines when node's erase event of the session follows, as they would
	// had they been copied before the erase.
	ErasedLines(node, sid string)
}

// DownloaderOptions configure a Downloader.
type DownloaderOptions struct {
	Admit Admitter
	// State keeps the hub position past rejected messages, which PI_ALL
	// cannot show: without it a restart would examine them again.
	State   jetstream.KeyValue
	MaxLine int // longest line assembled from chunks
	// Crypt opens sealed lines (end-to-end encryption); without it a
	// sealed line stops the copy as one without its key does.
	Crypt  *Crypt
	Logger *slog.Logger
	// HubLink names the leaf connection to the hub ("" while down;
	// embedded.Server.HubLink). When it changes, the pull and whatever the
	// hub sent on the old connection may be lost, and the downloader
	// pulls afresh; while it stays, messages are on their way however
	// long a slow link takes to carry them. Without it the downloader
	// tells only by silence, after stallAfter.
	HubLink func() string
}

// NewDownloader copies from the hub domain over nc into all.
func NewDownloader(nc *nats.Conn, all *All, hubDomain string, o DownloaderOptions) (*Downloader, error) {
	hub, err := jetstream.NewWithDomain(nc, hubDomain)
	if err != nil {
		return nil, fmt.Errorf("eventlog: downloader: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Admit == nil {
		return nil, errors.New("eventlog: downloader: no admission point")
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 64 << 20
	}
	watched := o.HubLink != nil
	if !watched {
		o.HubLink = func() string { return "unknown" }
	}
	d := &Downloader{nc: nc, domain: hubDomain, local: all.js, hub: hub, all: all, opts: o, logger: o.Logger,
		link: NewLink(o.Logger, "copying from the hub"), watched: watched, first: firstCopy{done: make(chan struct{})}}
	d.backlog.set(true) // until the first copy hears what the hub has
	return d, nil
}

// Idle returns a channel that is closed while the downloader copies no
// backlog: the last round it stored was the last the hub consumer had, a
// second passed with nothing from the hub, or no copy is under way (the hub
// out of reach). From NewDownloader until the first copy knows which, and
// while each copy makes its consumer, it is not. A daemon waits on it
// before it counts itself quiet: between two rounds of a catch-up the
// store's readers catch up with PI_ALL for a moment, and a collection and
// scavenge then cost the catch-up a tenth of its CPU (docs/PERFORMANCE.md).
func (d *Downloader) Idle() <-chan struct{} { return d.backlog.wait() }

// DownloaderStats are the downloader's counters.
type DownloaderStats struct {
	Copied    int64 `json:"copied"`
	Rejected  int64 `json:"rejected"`
	Connected bool  `json:"hubReachable"`
	// Held is how many sessions of other nodes have lines held here
	// until this machine has the team key they are sealed with; the
	// rest is copied meanwhile.
	Held int64 `json:"sessionsHeld"`
	// HeldFor names the team keys they wait for, where known.
	HeldFor []string `json:"heldForKeys,omitempty"`
	// HeldFrom names the nodes whose sessions they are.
	HeldFrom []string `json:"heldFromNodes,omitempty"`
}

// Stats returns the counters.
func (d *Downloader) Stats() DownloaderStats {
	st := DownloaderStats{Copied: d.copied.Load(), Rejected: d.rejected.Load(), Connected: d.link.Load(), Held: d.held.Load()}
	if kids := d.heldFor.Load(); kids != nil {
		st.HeldFor = *kids
	}
	if nodes := d.heldFrom.Load(); nodes != nil {
		st.HeldFrom = *nodes
	}
	return st
}

// Run copies until ctx ends; failures (the hub unreachable) are retried
// with a backoff of at most five seconds.
func (d *Downloader) Run(ctx context.Context) error {
	RunSessions(ctx, d.link, &d.copied, d.session)
	return nil
}

// hubHeartbeat is how often the hub tells an idle pull of the downloader
// that it is still there; two missed, and nats.go pulls again. The
// heartbeat waits behind any message on its way, so on a slow link the
// pull is renewed while a chunk is still crossing, which costs a request
// and nothing more. A pull lost with the link is noticed by the link's
// change instead (HubLink). (It was 2 s, which with the watchdog of the
// time kept a link under 64 KiB/s from ever carrying an image.)
const hubHeartbeat = 15 * time.Second

// stallAfter is how long the downloader waits in silence, on a link that
// has not changed, before it asks the hub how far its consumer got (and
// asks again after each as long): a fault nothing else shows (a message
// the hub gave to someone else's pull). It is twice the heartbeat; what the
// answer means on a slow link is checkConsumer's business.
const stallAfter = 2 * hubHeartbeat

// hubPullBytes is the most a pull of the hub consumer asks for, and the
// most its messages take of memory here.
const hubPullBytes = 8 << 20

// errRelinked ends a copy whose hub link was made again since it started.
var errRelinked = errors.New("downloader: the hub link was made again; pulling afresh")

// skipKey is the state key of the hub sequence up to which every message
// was examined, when the last of them were rejected.
const skipKey = "downloader.skipped"

// saveSkipped records that every hub message up to sequence to.seq was
// stored, passed over or held (skipKey), with the line at to.seq when it
// is known (the downloader's mark: rewound); without a state bucket,
// nothing.
func (d *Downloader) saveSkipped(ctx context.Context, to hubMark) error {
	if d.opts.State == nil {
		return nil
	}
	if _, err := d.opts.State.Put(ctx, skipKey, []byte(to.String())); err != nil {
		return fmt.Errorf("downloader: save position: %w", err)
	}
	return nil
}

// position reads PI_ALL's last sequence and the hub message copied (or
// passed over) last, the copy's mark (hubmark.go): PI_ALL's last line's,
// or the one skipKey records past it (lines passed over: this node's own
// coming back, refused ones). The mark's sequence is where the copy
// resumes.
func (d *Downloader) position(ctx context.Context) (allSeq uint64, mark hubMark, err error) {
	info, err := d.all.stream.Info(ctx)
	if err != nil {
		return 0, hubMark{}, fmt.Errorf("downloader: %s: %w", AllStream, err)
	}
	allSeq = info.State.LastSeq
	if d.rebuilt, err = d.rebuiltAt(ctx); err != nil {
		return 0, hubMark{}, err
	}
	if info.State.Msgs > 0 {
		// The last message still held: an erased session's may be gone
		// (the stream's last sequence stays, and is what the next write
		// expects; eventlog.KeepPosition leaves a copy of the erase event
		// in its place so that nothing erased is copied again).
		m, err := d.all.stream.GetLastMsgForSubject(ctx, AllPrefix+".>")
		if err != nil {
			return 0, hubMark{}, fmt.Errorf("downloader: last message of %s: %w", AllStream, err)
		}
		hubSeq, err := strconv.ParseUint(m.Header.Get(HdrHubSeq), 10, 64)
		if err != nil {
			return 0, hubMark{}, fmt.Errorf("downloader: last message of %s has no %s", AllStream, HdrHubSeq)
		}
		// A sequence of a PI_HUB since replaced (checkHub) is no mark.
		// The copy of an erase event that keeps an erased line's place
		// (KeepPosition) has no Pi-Src-Seq: its sequence alone is known.
		if m.Sequence > d.rebuilt {
			mark.seq = hubSeq
			if src := m.Header.Get(HdrSrcSeq); src != "" {
				mark.node, _, _ = ParseSubject(m.Subject)
				mark.src, _ = strconv.ParseUint(src, 10, 64)
				// Absent on a copy made before the time was kept.
				mark.time, _ = strconv.ParseInt(m.Header.Get(HdrHubTime), 10, 64)
			}
		}
	}
	if d.opts.State != nil {
		e, err := d.opts.State.Get(ctx, skipKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return 0, hubMark{}, fmt.Errorf("downloader: position: %w", err)
		default:
			if skipped, err := parseHubMark(string(e.Value())); err == nil && skipped.seq > mark.seq {
				mark = skipped
			}
		}
	}
	return allSeq, mark, nil
}

// session copies until it fails; a link made again starts the copy over
// at once, which is not a failure.
func (d *Downloader) session(ctx context.Context) error {
	for {
		err := d.copyFromHub(ctx)
		if !errors.Is(err, errRelinked) || ctx.Err() != nil {
			return err
		}
		d.logger.Debug("the hub link was made again; pulling afresh")
	}
}

// copyFromHub makes a consumer on the hub from PI_ALL's position and
// copies until an error.
func (d *Downloader) copyFromHub(ctx context.Context) error {
	d.backlog.set(true)        // until the hub says how much it has
	defer d.backlog.set(false) // nothing more comes from this copy
	link := d.opts.HubLink()   // before the consumer: a change after it is seen
	if err := d.checkHub(ctx); err != nil {
		return err
	}
	allSeq, mark, err := d.position(ctx)
	if err != nil {
		return err
	}
	hubSeq := mark.seq
	if hubSeq, err = d.passStatusLike(ctx, hubSeq); err != nil {
		return err
	}
	// Without the state bucket the copy's position cannot be kept past
	// held lines, older on the hub than what PI_ALL holds last once they
	// are released: a sealed line without its key then stops the copy.
	var park *parking
	if d.opts.State != nil {
		if park, err = openParking(ctx, d.local); err != nil {
			return err
		}
		d.showHeld(park)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cfg := jetstream.OrderedConsumerConfig{InactiveThreshold: 30 * time.Second}
	if hubSeq > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = hubSeq + 1
	}
	cons, err := openHubConsumer(cctx, d.nc, d.hub, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("downloader: hub consumer: %w", err)
	}
	if d.firstCopyDue(ctx, cons, false) {
		d.copiedAll(ctx) // nothing past PI_ALL's position: caught up already
	}
	// A short heartbeat: the hub drops a waiting pull without a word
	// when it sees no interest in its reply subject (the leaf link down
	// for a moment, at any time past the pull's first 2 s), and nats.go
	// pulls again only once two heartbeats are missed. With its default
	// (15 s for a 30 s pull) a line published while the link was down
	// reached PI_ALL up to 30 s late, and a catch-up waited for the
	// watchdog below (TestDownloaderPullLostWithTheLeaf).
	p, err := NewPump(cons, 512, hubPullBytes, jetstream.PullHeartbeat(hubHeartbeat))
	if err != nil {
		return fmt.Errorf("downloader: %w", err)
	}
	defer p.Stop()
	d.link.Up()
	progress := newBacklog(d.logger, "copying a backlog from the hub")

	// Two stages: one frames and admits the next round while the other
	// stores the round before in PI_ALL, so a catch-up does not leave the
	// store idle while it frames, nor the framing while it waits for the
	// store's fsync. Each write still states the PI_ALL sequence it
	// expects, known from the write before's reply: only one is in flight.
	fctx, stop := context.WithCancel(ctx)
	rounds := make(chan round, 1)
	var wg sync.WaitGroup
	wg.Go(func() { d.frame(fctx, cons, hubSeq, link, p, rounds, park) })
	defer func() {
		stop()
		wg.Wait()
	}()
	saved := uint64(0)
	save := func(to hubMark) error {
		if to.seq <= saved {
			return nil
		}
		if err := d.saveSkipped(ctx, to); err != nil {
			return err
		}
		saved = to.seq
		return nil
	}
	for r := range rounds {
		if r.err != nil {
			return r.err
		}
		if r.caughtUp {
			d.copiedAll(ctx) // every round before it is stored
			continue
		}
		if r.idle {
			d.backlog.set(false) // every round before it is stored, and nothing is on its way
			continue
		}
		if r.release.subj != "" {
			// Released lines are older on the hub than what PI_ALL
			// holds last: the position is kept first, so that it never
			// goes back to them.
			if err := save(r.skipTo); err != nil {
				return err
			}
		}
		if allSeq, err = d.storeLines(ctx, allSeq, r.lines); err != nil {
			return err
		}
		if err := save(r.skipTo); err != nil {
			return err
		}
		if r.release.upto > 0 {
			if err := park.release(ctx, r.release.subj, r.release.upto); err != nil {
				return err
			}
		}
		if r.wait != nil {
			// Wait for the key: what came before is stored, nothing
			// after is examined; the next session starts here again.
			return r.wait
		}
		if r.release.subj != "" {
			continue // released lines say nothing of what the hub still has
		}
		progress.update(r.msgs, r.pending, time.Now())
		d.backlog.set(r.pending > 0)
		if r.pending == 0 {
			d.copiedAll(ctx)
		}
	}
	return ctx.Err()
}

// round is what the framing stage hands the storing stage: the admitted
// lines of some hub messages, and what to do once they are stored.
type round struct {
	lines   [][]*nats.Msg
	msgs    int    // hub messages examined
	pending uint64 // messages the consumer still had after them
	// skipTo, when set, is the hub sequence up to which every message
	// was stored or passed over, with the line there when it is known:
	// the last of them were passed over, which PI_ALL cannot show, so
	// skipKey keeps it.
	skipTo hubMark
	wait   error // a sealed line waits for its key (seal.ErrNoKey)
	err    error // the session ends
	// release: the lines are held ones of this hub subject, framed from
	// PI_PARK; once they are stored, PI_PARK lets go of its messages
	// before upto.
	release parkRelease
	// caughtUp: no line, a mark that the hub had nothing more and no
	// line is held for a key, once the rounds before it are stored
	// (firstcopy.go).
	caughtUp bool
	// idle: no line, a mark that nothing was on its way from the hub
	// when it was sent: the downloader is idle once the rounds before it
	// are stored.
	idle bool
}

type parkRelease struct {
	subj string
	upto uint64
}

// frame reads the hub consumer (cons, through p, from after hub sequence
// from; made over the hub link named link), frames and admits, and sends
// each round to out, until an error or a line waiting for its key ends the
// session. A sealed line whose key is not here is held in park instead
// (nil: it ends the session), and what park holds is released when its
// key may be here: at the start, when the keyring changes, and every
// parkRetry for lines waiting for their key message. It closes out when
// it returns.
func (d *Downloader) frame(ctx context.Context, cons jetstream.Consumer, from uint64, link string, p *Pump, out chan<- round, park *parking) {
	defer close(out)
	send := func(r round) bool {
		select {
		case out <- r:
			return true
		case <-ctx.Done():
			return false
		}
	}
	fr := &framer{d: d, maxLine: d.opts.MaxLine, examined: from, park: park}
	var pending uint64     // what the consumer said was still to come
	var stamp string       // the keyring's when held lines were last tried
	var lagAgain time.Time // when lines waiting for a key message are tried again
	lagWait := parkRetry   // doubled while such lines keep waiting
	release := func(all bool) bool {
		stamp = d.keyringStamp()
		lag := false // a line still waits for its key message
		for _, subj := range park.subjects(func(kid string) bool { return all || kid == "" }) {
			for {
				lines, upto, how, kid, err := fr.releaseSubject(ctx, subj)
				if err != nil {
					send(round{err: err})
					return false
				}
				switch how {
				case releasedAll:
					park.unhold(subj)
				case releasedWaits:
					park.hold(subj, kid)
					lag = lag || kid == ""
				}
				if upto > 0 {
					if !send(round{lines: lines, pending: pending, skipTo: hubMark{seq: fr.safe()}, release: parkRelease{subj, upto}}) {
						return false
					}
					if how != releasedAll {
						park.next[subj] = upto
					}
				}
				if how != releasedMore {
					break
				}
			}
		}
		if lag {
			lagWait = min(2*lagWait, parkRetryMax)
		} else {
			lagWait = parkRetry
		}
		lagAgain = time.Now().Add(lagWait)
		d.notWaiting() // the lines tried and still waiting stay held
		d.showHeld(park)
		return true
	}
	releaseDue := func() (due, all bool) {
		if park == nil || len(park.held) == 0 {
			return false, false
		}
		if d.keyringStamp() != stamp {
			return true, true
		}
		return !time.Now().Before(lagAgain), false
	}
	if park != nil && len(park.held) > 0 && !release(true) {
		return
	}
	var silent time.Duration  // since the last message arrived
	var checked time.Duration // silent when the hub was last asked
	received := false         // a message came from the hub consumer
	idleSent := false         // the storing stage was told nothing is on its way, since the last message
	for {
		// The consumer's errors (a gap, the hub gone) end the wait at
		// once; in silence, the link is looked at now and then.
		began := time.Now()
		wctx, cancel := context.WithTimeout(ctx, linkPoll)
		batch, err := p.NextOrFail(wctx, MaxBatch, nil)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if err := p.Err(); err != nil {
				send(round{err: fmt.Errorf("downloader: %w", err)})
				return
			}
			if now := d.opts.HubLink(); now != link || now == "" {
				// The hub dropped the pull when it lost interest,
				// and what it sent on the old link may be lost:
				// once there is a link again, start over from
				// what PI_ALL holds.
				if now == "" {
					d.link.down()
				}
				if waitLinked(ctx, d.opts.HubLink) {
					send(round{err: errRelinked})
				}
				return
			}
			if pending == 0 {
				// Nothing is on its way: said by the storing stage once
				// the rounds before are stored. Said here, it made the
				// downloader idle while the last rounds were still being
				// stored, on a loaded machine (TestDownloaderIdleAfterBacklog,
				// 2026-12-07).
				if !idleSent {
					if !send(round{idle: true}) {
						return
					}
					idleSent = true
				}
				if d.firstCopyDue(ctx, cons, received) && !send(round{caughtUp: true}) {
					return
				}
			}
			if due, all := releaseDue(); due && !release(all) {
				return
			}
			// Woken from a stop or a sleep, the consumer is asked
			// about at once: the hub drops one left alone for 30 s,
			// and silence alone told so only stallAfter later (a
			// machine stopped for 150 s got the next line 29 s after it
			// went on, 2026-12-07).
			if silent += linkPoll; silent-checked < stallAfter && !slept(began, time.Now()) {
				continue
			}
			checked = silent
			if pending > 0 && !d.watched {
				// Silent with messages still to come and no error:
				// a pull whose messages never arrived; a new session
				// pulls afresh from PI_ALL's position instead of
				// waiting for the pull to expire. (On a watched link
				// a lost pull is the link's change, and a pull the
				// hub dropped is made again by nats.go when its
				// heartbeats stop.)
				send(round{err: fmt.Errorf("downloader: the hub consumer stalled with %d messages pending", pending)})
				return
			}
			if err := d.checkConsumer(ctx, cons, fr.examined, silent); err != nil {
				send(round{err: err})
				return
			}
			continue
		}
		silent, checked = 0, 0
		if err != nil {
			send(round{err: fmt.Errorf("downloader: %w", err)})
			return
		}
		received, idleSent = true, false
		lines, werr := fr.take(ctx, batch)
		if werr != nil && !errors.Is(werr, seal.ErrNoKey) {
			send(round{err: werr})
			return
		}
		pending = numPending(batch[len(batch)-1])
		r := round{lines: lines, msgs: len(batch), pending: pending, wait: werr}
		if fr.skipped && len(fr.run) == 0 {
			r.skipTo = markAt(batch, fr.examined) // a line still being assembled is read again from its start
		}
		d.showHeld(park)
		if !send(r) || werr != nil {
			return
		}
		if due, all := releaseDue(); due && !release(all) {
			return
		}
	}
}

// showHeld publishes what park holds to Stats, when that changed (a
// copy's rounds do not pay for it).
func (d *Downloader) showHeld(park *parking) {
	if park == nil || !park.changed {
		return
	}
	park.changed = false
	kids, nodes := park.keys(), park.nodes()
	d.heldFor.Store(&kids)
	d.heldFrom.Store(&nodes)
	d.held.Store(int64(len(park.held)))
}

// Held lines that wait for their key message (not on the hub server that
// answered yet: a replica that lags) are tried again parkRetry later, then
// twice as long each time they still wait, up to parkRetryMax; those
// waiting for a team key are tried when the keyring changes.
const (
	parkRetry    = 2 * time.Second
	parkRetryMax = time.Minute
)

// keyringStamp changes when the keyring's file does ("" without
// encryption here).
func (d *Downloader) keyringStamp() string {
	if d.opts.Crypt == nil {
		return ""
	}
	return d.opts.Crypt.keyringStamp()
}

// notWaiting clears the encryption status's "copying waits": the line
// that made it wait is held, and the copy goes on.
func (d *Downloader) notWaiting() {
	if d.opts.Crypt != nil {
		d.opts.Crypt.notWaiting()
	}
}

// keyID is the team key an error of open waits for, "" when it waits for
// something else (a key message not on the hub's server yet).
func keyID(err error) string {
	if nk := (*seal.NoKeyError)(nil); errors.As(err, &nk) {
		return nk.KeyID
	}
	return ""
}

// Worked reports whether the downloader's session with the hub was up
// once since it started.
func (d *Downloader) Worked() bool { return d.link.Ever() }

// checkConsumer asks the hub how far the consumer has delivered, after
// each stallAfter of silence (silent so far); handled is the hub sequence
// of the last message that arrived. A message the hub gave to a pull other
// than the downloader's (lost with the link, or taken by someone else) is
// never sent again, with no acks, and with no line after it nothing shows
// the gap; a consumer the hub lost without a word reaching here (removed
// or the hub restarted while the link was down) gets pulls that nothing
// answers. Either ends the session, and the next makes the consumer again
// from PI_ALL's position.
//
// On a watched link that has not changed, loss is mostly seen sooner, as
// the link's change, and silence is mostly a slow link: what the hub
// delivered is on its way behind what the link carries, and so is the
// answer to this question. So there a question left unanswered is no news,
// and a message delivered and not arrived is taken for lost only once the
// link has had time to carry it at carryRate. Starting over sooner sent
// the message again behind the first copy, at every attempt: below about
// 8 KiB/s a chunk of an image took longer than the attempt and never came.
func (d *Downloader) checkConsumer(ctx context.Context, cons jetstream.Consumer, handled uint64, silent time.Duration) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(qctx)
	if err != nil {
		if d.watched && ctx.Err() == nil && errors.Is(qctx.Err(), context.DeadlineExceeded) {
			return d.consumerGone(ctx)
		}
		return fmt.Errorf("downloader: the hub consumer, silent: %w; making it again", err)
	}
	if info.Delivered.Stream <= handled {
		return nil
	}
	if owed := info.Delivered.Stream - handled; d.watched && silent < stallAfter+owedTime(owed) {
		return nil
	}
	return fmt.Errorf("downloader: the hub consumer delivered up to hub sequence %d and only %d arrived; making it again", info.Delivered.Stream, handled)
}

// consumerGone tells, for a question about the consumer left unanswered
// on a watched link, a slow link (no news) from a consumer whose hub node
// is down: in a cluster the consumer has one replica, on any node of the
// stream's, and with that node down (kill -9) nothing answered for it, and
// the copy here stood still, the link up and status saying nothing wrong,
// until that node came back (a cluster probe, 2026-12-07). The stream's
// own answer comes over the same link, after the consumer's would have:
// when it comes, the consumer's never will.
func (d *Downloader) consumerGone(ctx context.Context) error {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.hub.Stream(qctx, HubStream); err != nil {
		return nil // the link is slow, or the hub busy: no news
	}
	return errors.New("downloader: the hub consumer does not answer where its stream does: the hub node that held it is down; making it again")
}

// owedTime is how long owed messages take at carryRate: each at most a
// chunk and its headers, and together at most what a pull asks for.
func owedTime(owed uint64) time.Duration {
	return carryTime(int(min(owed, hubPullBytes/MaxChunk+1))*(MaxChunk+4<<10), carryRate)
}

// passStatusLike passes over the messages a pull consumer's reader cannot
// take for what they are, at the start of the copy after hub sequence
// from: no payload and a Status header, which nats.go reads as a status of
// the server's (a node may store any headers, and the hub keeps them). A
// consumer dropped such a message, or ended at it, depending on the status
// claimed, and the copy started over at it, again and again: one message
// of one node stopped every machine of its team for good. The copy starts
// over at the message it finds missing, so here is where it meets one.
// Each is counted as rejected for its node, and the position kept past it.
func (d *Downloader) passStatusLike(ctx context.Context, from uint64) (uint64, error) {
	start := from
	for range maxStatusLike {
		m, err := hubNext(ctx, d.hub, HubStream, from+1, UpPrefix+".>")
		if err != nil {
			// An older hub answers direct gets only, which cannot tell such
			// a message from a status: the copy goes on as it did.
			d.logger.Debug("downloader: could not look at the hub's next message", "err", err)
			break
		}
		if m == nil || !statusLike(m.Header, m.Data) {
			break
		}
		node, sid, _ := ParseSubject(m.Subject)
		d.rejected.Add(1)
		d.opts.Admit.Reject(node, sid, RejectStatusLike, fmt.Sprintf("hub sequence %d: no payload and a Status header %.40q, which a reader takes for the server's", m.Sequence, m.Header.Get("Status")))
		from = m.Sequence
	}
	if from == start {
		return from, nil
	}
	return from, d.saveSkipped(ctx, hubMark{seq: from})
}

// RejectStatusLike is the reason passStatusLike gives.
const RejectStatusLike = "status"

// maxStatusLike bounds the messages passStatusLike passes over at once;
// the copy meets the rest as it starts over.
const maxStatusLike = 1024

// statusLike reports whether a stored message is one nats.go's readers
// take for a status of the server's: no payload and a Status header.
func statusLike(h nats.Header, data []byte) bool {
	return len(data) == 0 && h.Get("Status") != ""
}

// keyMessage reads the first message of the hub's PI_KEYS at or after
// sequence h on a subject matching filter: its subject, body and sequence;
// sequence 0 when there is none yet.
func (d *Downloader) keyMessage(ctx context.Context, h uint64, filter string) (string, []byte, uint64, error) {
	m, err := hubNext(ctx, d.hub, KeysStream, h, filter)
	if err != nil {
		return "", nil, 0, fmt.Errorf("downloader: key message %d: %w", h, err)
	}
	if m == nil {
		return "", nil, 0, nil
	}
	return m.Subject, m.Data, m.Sequence, nil
}

// hubNext reads the first message of the hub's stream at or after
// sequence h on a subject matching filter (nil when there is none). It
// asks as the stream allows, which a stream info says first: a hub of this
// release turns direct gets off, and a node reads with JetStream's message
// API, which takes no batch and answers in JSON (a node's stored headers
// cannot pass for a status there); an older hub answers direct gets only.
func hubNext(ctx context.Context, hub jetstream.JetStream, stream string, h uint64, filter string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := hub.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return streamNext(ctx, s, h, filter)
}

// streamNext is hubNext on a stream looked up already (its info kept).
func streamNext(ctx context.Context, s jetstream.Stream, h uint64, filter string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m, err := s.GetMsg(ctx, h, jetstream.WithGetMsgSubject(filter))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case m.Sequence < h:
		return nil, fmt.Errorf("%s: reply at sequence %d, asked from %d", s.CachedInfo().Config.Name, m.Sequence, h)
	}
	return m, nil
}

// keysLast is the last sequence of the hub's PI_KEYS, as its leader has it
// (a stream info is answered by the leader; a direct get may be answered
// by a replica that lags).
func (d *Downloader) keysLast(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := d.hub.Stream(ctx, KeysStream) // one stream info request
	if err != nil {
		return 0, fmt.Errorf("downloader: %s info: %w", KeysStream, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// store writes messages into PI_ALL after sequence last, as one atomic
// batch (one fsync) or, for a single message, a plain publish.
func (d *Downloader) store(ctx context.Context, last uint64, out []*nats.Msg) (uint64, error) {
	if len(out) == 0 {
		return last, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var seq uint64
	if len(out) == 1 {
		ack, err := d.local.PublishMsg(rctx, out[0], jetstream.WithExpectLastSequence(last))
		if err != nil {
			return last, suspectStore(d.all.suspect, ctx, fmt.Errorf("downloader: store: %w", err))
		}
		seq = ack.Sequence
	} else {
		var err error
		if seq, err = publishAtomic(rctx, d.nc, out, hdrExpLastSeq, last); err != nil {
			return last, suspectStore(d.all.suspect, ctx, fmt.Errorf("downloader: store: %w", err))
		}
	}
	d.copied.Add(int64(len(out)))
	// Stored after last, so at last+1 on: the write stated it.
	d.all.stored.offer(last+1, out)
	return seq, nil
}
