package eventlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/seal"
)

// Reasons the downloader itself gives for passing a message over; the
// admission point gives the others.
const (
	rejectBrokenChunks = "broken-chunk-run"
	rejectTooLong      = "too-long" // admit.TooLong: the same label as the gate's
	rejectBadSubject   = "bad-subject"
	rejectShaMismatch  = "headers-disagree-with-payload"
)

// framer turns the hub's messages, in stream order, into whole events,
// asks the admission point about each, and returns the messages of the
// admitted ones grouped per line. An honest forwarder stores a split line
// as one atomic batch, so its chunks stand together in PI_HUB: a run broken
// by any other message is passed over. At most one line is assembled at a
// time, and never past maxLine, whatever a node sends.
type framer struct {
	d       *Downloader
	maxLine int

	run     []jetstream.Msg // the chunks of the line being assembled
	runSize int
	// drop is the subject of a run being passed over, and the chunk
	// index that would continue it: its later chunks go silently.
	drop     string
	dropNext int

	examined uint64 // hub sequence of the last message taken (at first, the one the consumer starts after)
	skipped  bool   // the messages after the last admitted one were all passed over
	waitFrom uint64 // first hub sequence of the sealed line being opened
	// held: the origin position of the last line of each origin's
	// session that PI_ALL holds or that was examined since (All.lastSrc),
	// for sealed lines and, after the hub's store was replaced, for all.
	held map[pair]uint64
	// copies: the hashes of the lines PI_ALL holds of an origin's
	// session, read when a plain line of it comes at or before its held
	// position after the hub's store was replaced (holdsCopy).
	copies map[pair]map[[32]byte]struct{}
	// floor: the key message handle of the last erase event of each
	// session examined (All.keyFloor).
	floor map[string]uint64
	// erasedOn: the hub subjects (node and session token) of sealed lines
	// passed over as erased, which cannot tell their session until the
	// erase event on the same subject opens (ErasedLines).
	erasedOn map[pair]struct{}

	// park holds a sealed line this machine has no key for, and every
	// later message of its hub subject (park.go); nil: such a line stops
	// the copy (the framer of a release, or no state bucket to keep the
	// copy's position past held lines).
	park *parking
	// releasing: the framer of parked lines. A copy of a line PI_ALL
	// holds is passed over without a word there: the release before was
	// stored and not yet taken out of PI_PARK when the daemon stopped.
	releasing bool
}

// maxHeld bounds framer.held and framer.floor: past it a map starts
// again, read from PI_ALL, so what a session's lines make it keep stays
// bounded.
const maxHeld = 100_000

// remembered returns (*m)[k], read with load and kept when *m lacks it; a
// map grown to maxHeld starts again (PI_ALL answers again for those
// dropped).
func remembered[K comparable](m *map[K]uint64, k K, load func() (uint64, error)) (uint64, error) {
	if v, ok := (*m)[k]; ok {
		return v, nil
	}
	v, err := load()
	if err != nil {
		return 0, err
	}
	if *m == nil || len(*m) >= maxHeld {
		*m = map[K]uint64{}
	}
	(*m)[k] = v
	return v, nil
}

// pair is an origin node and one of its sessions.
type pair struct{ node, sid string }

// take frames msgs and returns the admitted lines, as PI_ALL messages.
// It stops at a sealed line this machine has no key for: it returns the
// lines before it and an error wrapping seal.ErrNoKey, and examines
// nothing past it, so the line is read again once the key is here.
func (f *framer) take(ctx context.Context, msgs []jetstream.Msg) ([][]*nats.Msg, error) {
	var out [][]*nats.Msg
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("downloader: %w", err)
		}
		prev := f.examined
		f.examined = meta.Sequence.Stream
		line, err := f.add(ctx, m, meta)
		if errors.Is(err, seal.ErrNoKey) {
			f.examined = prev
			if s, ok := f.waitStart(); ok {
				f.examined = s - 1
			}
			return out, err
		}
		if err != nil {
			return nil, err
		}
		if line != nil {
			out = append(out, line)
		}
	}
	return out, nil
}

// subjectNode is the node a hub subject that names no session is counted
// against: its node token, on which only that node may publish (the hub's
// permissions), or "" when it has none.
func subjectNode(subj string) string {
	parts := strings.SplitN(subj, ".", 4)
	if len(parts) >= 3 && parts[0]+"."+parts[1] == UpPrefix && ValidNodeID(parts[2]) {
		return parts[2]
	}
	return ""
}

// add takes one message: the admitted line it completes, or nil.
func (f *framer) add(ctx context.Context, m jetstream.Msg, meta *jetstream.MsgMetadata) ([]*nats.Msg, error) {
	subj, h := m.Subject(), m.Headers()
	node, sid, err := ParseSubject(subj)
	if err != nil {
		f.breakRun()
		f.reject(subjectNode(subj), "", rejectBadSubject, fmt.Sprintf("%.80q", subj))
		return nil, nil
	}
	i, n, cerr := ParseChunk(h.Get(HdrChunk))
	if f.drop != "" {
		if cerr == nil && subj == f.drop && i == f.dropNext {
			f.dropNext++
			f.skipped = true
			if i == n {
				f.drop = ""
			}
			return nil, nil
		}
		f.drop = ""
	}
	if len(f.run) > 0 && (cerr != nil || subj != f.run[0].Subject() || i != len(f.run)+1) {
		f.breakRun()
	}
	if f.isHeld(subj) {
		// Behind a held line of its subject: held too, unread, in order,
		// unless its node has all of its share of PI_PARK already.
		if f.pastShare(node, sid, []jetstream.Msg{m}, "") {
			return nil, nil
		}
		if err := f.park.park(ctx, []jetstream.Msg{m}, ""); err != nil {
			return nil, err
		}
		f.skipped = true
		return nil, nil
	}
	// One more for a sealed line: an envelope holds a little less.
	maxChunks := (f.maxLine+MaxChunk-1)/MaxChunk + 1
	switch {
	case cerr != nil:
		f.rejectRun(h, node, sid, cerr.Error())
		return nil, nil
	case len(m.Data()) > MaxChunk:
		f.rejectRun(h, node, sid, fmt.Sprintf("a chunk of %d bytes, more than %d", len(m.Data()), MaxChunk))
		f.dropRest(subj, i, n)
		return nil, nil
	case n > maxChunks:
		f.rejectRunAs(h, node, sid, rejectTooLong, f.tooLong(fmt.Sprintf("a line of %d chunks of up to %d bytes", n, MaxChunk)))
		f.dropRest(subj, i, n)
		return nil, nil
	case i > 1 && len(f.run) == 0:
		f.rejectRun(h, node, sid, fmt.Sprintf("chunk %d/%d without its start", i, n))
		f.dropRest(subj, i, n)
		return nil, nil
	}
	f.run = append(f.run, m)
	f.runSize += len(m.Data())
	if f.runSize > f.maxLine {
		f.run, f.runSize = nil, 0
		f.rejectRunAs(h, node, sid, rejectTooLong, f.tooLong("a line"))
		f.dropRest(subj, i, n)
		return nil, nil
	}
	if i < n {
		return nil, nil
	}
	run := f.run
	f.run, f.runSize = nil, 0
	if run[0].Headers().Get(HdrSeal) != "" {
		line, err := f.addSealed(ctx, node, sid, run, meta)
		if errors.Is(err, seal.ErrNoKey) && f.park != nil {
			return nil, f.hold(ctx, node, sid, run, err)
		}
		return line, err
	}
	if c := f.d.opts.Crypt; c != nil && c.always {
		// Encryption is on here: a line in clear is any hub client's (the
		// hub's operator may publish on every node's subject), not the
		// team's, whose lines are sealed.
		f.reject(node, sid, RejectUnsealed, "a line in clear, and encryption is on here (PISYNC_ENCRYPT=on)")
		return nil, nil
	}
	ev, err := newEvent(HubStream, subj, meta.Sequence.Stream, run[0].Headers())
	if err != nil {
		f.reject(node, sid, rejectShaMismatch, err.Error())
		return nil, nil
	}
	if len(run) == 1 {
		ev.Raw = run[0].Data()
	} else {
		var b bytes.Buffer
		b.Grow(f.runSize)
		for _, c := range run {
			b.Write(c.Data())
		}
		ev.Raw = b.Bytes()
	}
	if (ev.Op == "" || h.Get(HdrSha) != "") && sha256.Sum256(ev.Raw) != ev.Sha {
		f.reject(node, sid, rejectShaMismatch, "payload does not match "+HdrSha)
		return nil, nil
	}
	if ok, err := f.admit(ctx, ev, meta, false, 0); !ok || err != nil {
		return nil, err
	}
	out := make([]*nats.Msg, 0, len(run))
	for _, m := range run {
		cm, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("downloader: %w", err)
		}
		nm := newLineMsg(AllSubject(node, sid))
		copyHeaders(nm.Header, m.Headers())
		nm.Header.Set(HdrHubSeq, strconv.FormatUint(cm.Sequence.Stream, 10))
		nm.Header.Set(HdrHubTime, strconv.FormatInt(cm.Timestamp.UnixNano(), 10)) // the downloader's mark (hubmark.go)
		nm.Data = m.Data()
		out = append(out, nm)
	}
	return out, nil
}

// admit asks the admission point about ev. After the hub's store was
// replaced, a line PI_ALL holds already is passed over first (All.lastSrc).
// A sealed line at or before the last position of its origin's session
// admitted already is refused as replayed: its envelope binds its
// position, not its place on the hub, and an origin sends a session's
// lines in order, each once (the forwarder states the subject's last
// sequence), so a second copy is the hub's doing: a delete event stored
// again after its restore would delete the session again everywhere.
//
// A sealed line (handle: its key message's, 0 for a plain one) that
// names a key message older than the last erase event of its session
// names is refused as erased: its session's lines before the erase are
// gone from PI_ALL, so lastSrc no longer tells a copy of one stored again
// by the hub (its key message still there: a node away that has not
// destroyed its own yet) from a line written after the erase, which names
// a key message drawn after it. A version 1 envelope (handle 0) names
// none: in a session erased since, it is refused so too, as a copy the
// hub kept from before (every workstation of a team seals version 2, and
// an erase's floor is version 2's).
func (f *framer) admit(ctx context.Context, ev *Event, meta *jetstream.MsgMetadata, sealed bool, handle uint64) (bool, error) {
	if sealed {
		floor, err := remembered(&f.floor, ev.SID, func() (uint64, error) { return f.d.all.keyFloor(ctx, ev.SID, f.d.rebuilt) })
		if err != nil {
			return false, err
		}
		switch {
		case handle == 0 && floor > 0:
			f.reject(ev.Node, ev.SID, RejectErased, fmt.Sprintf("a version 1 envelope, of before the session's erase (%d)", floor))
			return false, nil
		case handle < floor:
			f.reject(ev.Node, ev.SID, RejectErased, fmt.Sprintf("key message %d is older than the session's erase (%d)", handle, floor))
			return false, nil
		}
	}
	// A release passes over any line at or before its session's last
	// position in PI_ALL, plain ones too: a held line parked twice (the
	// daemon stopped after parking it and before its position was saved)
	// is released once.
	if (f.d.rebuilt > 0 || sealed || f.releasing) && ev.SrcSeq > 0 {
		k := pair{ev.Node, ev.SID}
		held, err := remembered(&f.held, k, func() (uint64, error) { return f.d.all.lastSrc(ctx, ev.Node, ev.SID) })
		if err != nil {
			return false, err
		}
		switch {
		case ev.SrcSeq > held:
			f.held[k] = ev.SrcSeq // admitted or not, the origin's lines come in order
			delete(f.copies, k)   // past what PI_ALL held of it
		case f.releasing:
			f.skipped = true // released before: stored, not yet taken out of PI_PARK
			return false, nil
		case f.d.rebuilt > 0 && !sealed:
			copied, err := f.holdsCopy(ctx, k, ev.Sha)
			if err != nil {
				return false, err
			}
			if copied {
				f.skipped = true // the new hub's copy of a line PI_ALL holds
				return false, nil
			}
		case f.d.rebuilt > 0:
			f.skipped = true // the new hub's copy of a line PI_ALL holds
			return false, nil
		default:
			f.reject(ev.Node, ev.SID, RejectReplayed, fmt.Sprintf("position %d, and %d of the session was admitted already", ev.SrcSeq, held))
			return false, nil
		}
	}
	err := f.d.opts.Admit.Admit(ctx, ev, meta.Timestamp)
	if errors.Is(err, ErrRejected) {
		f.d.rejected.Add(1)
		f.skipped = true
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("downloader: admission: %w", err)
	}
	f.skipped = false
	if handle > 0 && ev.Op == OpErase {
		// Only an erase admitted raises the floor, as only those PI_ALL
		// holds name one (keyFloor): one passed over (a copy of a line
		// PI_ALL holds, sealed again for a new hub under a newer key
		// message than lines its origins sealed for it before) refused
		// the session's later lines as erased until a restart.
		f.floor[ev.SID] = handle
	}
	return true, nil
}

// holdsCopy reports whether PI_ALL holds the line of origin session k
// whose hash is sha. After the hub's store was replaced, a plain line at
// or before its session's held position is most often the new hub's copy
// of a line PI_ALL holds, and passed over; but an origin whose own store
// was restored from an older copy numbers its lines again from there, and
// a line it wrote since came under a position PI_ALL had passed: it was
// passed over for good on every machine whose hub had once been replaced,
// and the next line of the session went in after a parent those machines
// lacked (a probe, 2026-12-07). It is admitted now, and so a second copy
// of it is not.
func (f *framer) holdsCopy(ctx context.Context, k pair, sha [32]byte) (bool, error) {
	set, ok := f.copies[k]
	if !ok {
		set = map[[32]byte]struct{}{}
		err := ReadSubject(ctx, f.d.all.JetStream(), f.d.all.Stream(), AllSubject(k.node, k.sid), 0, true, func(ev *Event) error {
			set[ev.Sha] = struct{}{}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("downloader: the lines %s holds of %s from %s: %w", AllStream, k.sid, k.node, err)
		}
		if f.copies == nil || len(f.copies) >= maxCopies {
			f.copies = map[pair]map[[32]byte]struct{}{}
		}
		f.copies[k] = set
	}
	if _, ok := set[sha]; ok {
		return true, nil
	}
	set[sha] = struct{}{}
	return false, nil
}

// maxCopies bounds framer.copies: the sessions whose lines the new hub is
// copying again at once, a few at a time in its order.
const maxCopies = 16

// maxErasedOn bounds framer.erasedOn: one entry per node and erased
// session seen since the copy began.
const maxErasedOn = 100_000

// addSealed opens a sealed line (its run of envelopes on the hub subject
// of node's session token tok) before the admission point, which then
// judges the opened line exactly as a plain one. What does not open is
// passed over and counted (RejectUndecryptable, RejectMoved); a line
// sealed with a key this machine lacks stops the copy (seal.ErrNoKey).
func (f *framer) addSealed(ctx context.Context, node, tok string, run []jetstream.Msg, meta *jetstream.MsgMetadata) ([]*nats.Msg, error) {
	first, err := run[0].Metadata()
	if err != nil {
		return nil, fmt.Errorf("downloader: %w", err)
	}
	f.waitFrom = first.Sequence.Stream
	srcSeq, err := strconv.ParseUint(run[0].Headers().Get(HdrSrcSeq), 10, 64)
	if err != nil {
		f.rejectUnopened(node, tok, RejectUndecryptable, "no "+HdrSrcSeq)
		return nil, nil
	}
	envs := make([][]byte, len(run))
	for i, m := range run {
		if m.Headers().Get(HdrSrcSeq) != run[0].Headers().Get(HdrSrcSeq) {
			f.rejectUnopened(node, tok, RejectUndecryptable, "chunks of different positions")
			return nil, nil
		}
		envs[i] = m.Data()
	}
	if f.d.opts.Crypt == nil {
		return nil, fmt.Errorf("downloader: a sealed line from %s: %w", node, seal.ErrNoKey)
	}
	ev, err := f.d.opts.Crypt.open(node, tok, srcSeq, envs, f.maxLine)
	if h, ok := needKey(err); ok {
		ev, err = f.openWithKey(ctx, node, tok, h, srcSeq, envs)
	}
	var bad *errUnsealed
	if errors.As(err, &bad) {
		if bad.reason == RejectErased && len(f.erasedOn) < maxErasedOn {
			if f.erasedOn == nil {
				f.erasedOn = map[pair]struct{}{}
			}
			f.erasedOn[pair{node, tok}] = struct{}{}
		}
		f.rejectUnopened(node, tok, bad.reason, bad.Error())
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("downloader: a sealed line from %s: %w", node, err)
	}
	ev.Seq = meta.Sequence.Stream
	if len(ev.Raw) > f.maxLine {
		f.reject(node, ev.SID, rejectTooLong, f.tooLong(fmt.Sprintf("a line of %d bytes", len(ev.Raw))))
		return nil, nil
	}
	if (ev.Op == "" || ev.Sha != [32]byte{}) && sha256.Sum256(ev.Raw) != ev.Sha {
		f.reject(node, ev.SID, rejectShaMismatch, "payload does not match its sha")
		return nil, nil
	}
	handle, _ := seal.Handle(envs[0]) // 0: a version 1 envelope, its key in it
	if _, ok := f.erasedOn[pair{node, tok}]; ok && ev.Op == OpErase {
		// A machine that joined after the erase: the node's lines before
		// it were passed over, and without them it would seem never to
		// have written the session, and its erase would be refused while
		// the lines of another node that was away when it erased (its
		// key messages still on the hub) were copied.
		f.d.opts.Admit.ErasedLines(node, ev.SID)
	}
	if ok, err := f.admit(ctx, ev, meta, true, handle); !ok || err != nil {
		return nil, err
	}
	l := Line{Raw: ev.Raw, Sha: ev.Sha, ID: ev.ID, ParentID: ev.ParentID, Type: ev.Type, File: ev.File, Off: ev.Off, Op: ev.Op, SrcSeq: ev.SrcSeq}
	out := l.messages(AllSubject(node, ev.SID))
	for _, m := range out {
		if ev.Sha == [32]byte{} {
			m.Header.Del(HdrSha)
		}
		m.Header.Set(HdrHubSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
		m.Header.Set(HdrHubTime, strconv.FormatInt(meta.Timestamp.UnixNano(), 10))
		if ev.Op == OpErase && handle > 0 {
			m.Header.Set(HdrKeyFloor, strconv.FormatUint(handle, 10))
		}
	}
	return out, nil
}

// openWithKey fetches key message h from the hub's PI_KEYS, gives it to
// the opener and opens the line. The get asks for the first message of
// PI_KEYS at or after h: key messages are published before the lines
// naming them, and PI_KEYS loses a message only when a later one on its
// subject replaces it (a tombstone: an erase). So a reply past h, or an
// empty one (a tombstone), means the line can never be opened: it is
// passed over as erased. No reply means the key message is not on the
// server that answered yet: it is waited for, as a missing team key is,
// unless it lies past the last PI_KEYS holds (keysLast): then it never was. One on another
// node's or session's subject is refused as moved (asking for the line's
// own subjects only would instead wait for ever there).
func (f *framer) openWithKey(ctx context.Context, node, tok string, h, srcSeq uint64, envs [][]byte) (*Event, error) {
	c := f.d.opts.Crypt
	subj, body, seq, err := f.d.keyMessage(ctx, h, KeyPrefix+".>")
	kid, own := strings.CutPrefix(subj, KeySubject(node, tok)+".")
	switch {
	case err != nil:
		return nil, err
	case seq == 0:
		// Not on the server that answered. A key message is stored
		// before any line that names it, so one past the last that
		// PI_KEYS's leader holds was never stored: a forged envelope,
		// refused rather than waited for (the wait holds back every line
		// after it, of every node, on every machine).
		last, err := f.d.keysLast(ctx)
		if err != nil {
			return nil, err
		}
		if h > last {
			return nil, &errUnsealed{RejectUndecryptable, fmt.Errorf("it names key message %d, and %s ends at %d: no such key message was ever stored", h, KeysStream, last)}
		}
		return nil, c.keyWait(node, h)
	case seq != h || len(body) == 0:
		return nil, &errUnsealed{RejectErased, fmt.Errorf("key message %d is gone from %s: the session was erased", h, KeysStream)}
	case !own || kid == "" || strings.Contains(kid, "."):
		return nil, &errUnsealed{RejectMoved, fmt.Errorf("key message %d is on %q, not one of %s's key subjects of %s", h, subj, node, tok)}
	}
	if err := c.addKey(node, tok, h, body); err != nil {
		return nil, err
	}
	return c.open(node, tok, srcSeq, envs, f.maxLine)
}

// isHeld reports whether hub subject subj is held (parking).
func (f *framer) isHeld(subj string) bool {
	if f.park == nil {
		return false
	}
	_, ok := f.park.held[subj]
	return ok
}

// hold parks run, a sealed line of node's session token tok that waits
// for a key (why), and holds its hub subject: the copy goes on past it. A
// node holding maxHeldPerNode subjects, or its share of PI_PARK's bytes,
// already has the line passed over. When PI_PARK refuses it (full), the
// copy waits at it instead, as it did before lines were held: the error
// wraps why.
func (f *framer) hold(ctx context.Context, node, tok string, run []jetstream.Msg, why error) error {
	if f.park.full(node) {
		f.reject(node, tok, RejectHeldLimit, fmt.Sprintf("%d of its sessions wait for a team key here already: %v", maxHeldPerNode, why))
		return nil
	}
	if f.pastShare(node, tok, run, ": "+why.Error()) {
		return nil
	}
	if err := f.park.park(ctx, run, keyID(why)); err != nil {
		return fmt.Errorf("%w (and it cannot be held aside: %v)", why, err)
	}
	f.skipped = true
	f.d.notWaiting() // what waited is held: everything else goes on
	return nil
}

// pastShare passes over msgs, of node's session token tok, when holding
// them would take node past its share of PI_PARK (parkNodeBytes); why
// ends the rejection's detail.
func (f *framer) pastShare(node, tok string, msgs []jetstream.Msg, why string) bool {
	if !f.park.overShare(node, msgs) {
		return false
	}
	f.reject(node, tok, RejectHeldLimit, fmt.Sprintf("its lines held here for a team key take %d MiB already%s", parkNodeBytes>>20, why))
	return true
}

// safe is the hub sequence up to which every message examined was stored,
// passed over or held: the start of a line still being assembled is read
// again.
func (f *framer) safe() uint64 {
	if len(f.run) > 0 {
		if meta, err := f.run[0].Metadata(); err == nil {
			return meta.Sequence.Stream - 1
		}
	}
	return f.examined
}

// waitStart is the hub sequence of the first chunk of the line that
// stopped the copy for a key.
func (f *framer) waitStart() (uint64, bool) { return f.waitFrom, f.waitFrom > 0 }

// breakRun passes over a split line whose run another message broke.
func (f *framer) breakRun() {
	if len(f.run) == 0 {
		return
	}
	node, sid, _ := ParseSubject(f.run[0].Subject())
	f.rejectRun(f.run[0].Headers(), node, sid, fmt.Sprintf("split line broken off after %d chunks", len(f.run)))
	f.run, f.runSize = nil, 0
}

// dropRest passes over the chunks after i of a run of n on subj.
func (f *framer) dropRest(subj string, i, n int) {
	if i < n {
		f.drop, f.dropNext = subj, i+1
	}
}

// rejectRun passes over a broken run of chunks (a message of it has
// headers h) on the subject of node's session sid: under no session when
// the subject names a session's token rather than its id, as a sealed
// line's does, and any line's while encryption is on here (every line of
// the team is sealed then).
func (f *framer) rejectRun(h nats.Header, node, sid, detail string) {
	f.rejectRunAs(h, node, sid, rejectBrokenChunks, detail)
}

// rejectRunAs is rejectRun for another reason than a broken run.
func (f *framer) rejectRunAs(h nats.Header, node, sid, reason, detail string) {
	if h.Get(HdrSeal) != "" || f.d.opts.Crypt != nil && f.d.opts.Crypt.always {
		f.rejectUnopened(node, sid, reason, detail)
		return
	}
	f.reject(node, sid, reason, detail)
}

func (f *framer) tooLong(what string) string { return TooLongDetail(what, f.maxLine) }

// TooLongDetail says why a line (what) past this machine's longest,
// maxLine, is not copied, and what would copy the next: the sender's
// PISYNC_MAX_LINE may be larger. The line is not copied later: the
// position moves past it.
func TooLongDetail(what string, maxLine int) string {
	return fmt.Sprintf("%s, longer than this machine's PISYNC_MAX_LINE (%d bytes): not copied here, now or later; raise PISYNC_MAX_LINE here to at least the sender's to copy such lines", what, maxLine)
}

// rejectUnopened passes over a message that names its session's token
// (sealed), not opened or not assembled: counted for its node with no
// session, the token in the detail. Under the token it quarantined
// nothing (the admission point knows sessions by id), while status listed
// the token as a session whose further lines were passed over.
func (f *framer) rejectUnopened(node, tok, reason, detail string) {
	f.reject(node, "", reason, detail+" (session token "+tok+")")
}

func (f *framer) reject(node, sid, reason, detail string) {
	f.d.rejected.Add(1)
	f.skipped = true
	f.d.opts.Admit.Reject(node, sid, reason, detail)
}

// batchBytes bounds one atomic batch into PI_ALL (one fsync, a bounded
// staging store on the server), except that a split line is never cut.
const batchBytes = 8 << 20

// storeLines writes the admitted lines into PI_ALL after sequence last,
// in atomic batches that never split a line: PI_ALL holds whole lines only.
func (d *Downloader) storeLines(ctx context.Context, last uint64, lines [][]*nats.Msg) (uint64, error) {
	var batch []*nats.Msg
	size := 0
	var err error
	for _, l := range lines {
		ls := 0
		for _, m := range l {
			ls += len(m.Data)
		}
		if len(batch) > 0 && (len(batch)+len(l) > MaxBatch || size+ls > batchBytes) {
			if last, err = d.store(ctx, last, batch); err != nil {
				return last, err
			}
			batch, size = batch[:0], 0
		}
		batch = append(batch, l...)
		size += ls
	}
	if len(batch) > 0 {
		return d.store(ctx, last, batch)
	}
	return last, nil
}

// copyHeaders keeps a hub message's Pi-* headers for PI_ALL.
func copyHeaders(dst, src nats.Header) {
	for k, v := range src {
		if len(k) > 3 && k[:3] == "Pi-" {
			dst[k] = v
		}
	}
}
