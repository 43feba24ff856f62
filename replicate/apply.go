package replicate

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
)

// sess is the replicator's state of one session.
type sess struct {
	sid    string
	header *eventlog.Event // the first header line seen from another node
	file   *replica        // where its lines go here; nil until known
	queue  []*eventlog.Event
	// seen holds every entry id any node published for the session, and
	// the first line that claimed it.
	seen map[string]claim
	// firstChild maps a parent id to the node of its first child: a second
	// node continuing from the same entry forks the session.
	firstChild map[string]string
	deleted    bool
	// away: its file here went away (deleted here, or another session's
	// took its place). Nothing is made in its place until the tailer has
	// said what became of it: its deletion, back from the hub, drops the
	// lines (deletedHere); a file of it found where the tailer follows it
	// (moved, restored) takes them. Before, the next line made the file
	// again with the header alone (its other lines known, not written),
	// the lines after it waited for good, and the deletion, its file
	// back before the tailer's walk confirmed it, was never published.
	away bool
	// trashAfter is a deletion from another machine of a session a local
	// pi wrote within the last crashAfter(Idle): it waits until the file
	// has been left alone that long (trashed then), or until the file
	// changes (pi still writes it: kept). trashSeen is the file then.
	trashAfter *eventlog.Event
	trashSeen  fragment
	// checked: whether the state bucket was asked if the session was
	// deleted elsewhere. Once per run is enough: only this replicator
	// records deletions, and tombstone sets deleted as it does.
	checked bool
	// writeCap bounds the lines one write takes (0: none): halved each
	// time a full disk refuses a write of several, so that what fits goes
	// in rather than the whole backlog waiting for room for all of it.
	writeCap int
	// refillAll: the session was restored here after a deletion here, and
	// the lines other machines wrote meanwhile were passed over: its file
	// gets every line PI_ALL holds that it lacks (refill), once.
	refillAll bool
	// letGo: the session was let go of with a file here (evict.go), and
	// this is what was known of that file; nil once the file is read
	// again.
	letGo *letGo
	// quarantined says why the session's lines are no longer written
	// here: a write that can never succeed (an unsafe path, a link in
	// the file's place). Reported in status, never a stall for others.
	quarantined string
	// recorded: the session's quarantine is in the state bucket
	// (quarantine.go), from this run or one before.
	recorded bool
	// partial: the lines wait because the file here ends in a partial
	// line (a pi writing it, or one that stopped mid-line and is ended
	// after crashAfter): counted for status, which said only how many
	// lines waited, not why nor for which session.
	partial bool
	// failures counts writes that failed in a row for a reason that may
	// pass (a full disk): the session waits until retryAt.
	failures int
	retryAt  time.Time
	// origin is the node that published the session's header, "" until
	// known; originRead says PI_ALL was asked.
	origin     string
	originRead bool
	// untrusted: nodes whose lines here were passed over (logged once).
	untrusted map[string]bool
	// oldHeader: a version 1 or 2 header of the session was seen; a
	// version 3 one after it is a migration (migrate.go).
	oldHeader bool
	// oldVersion is that header's version (a missing one is 0).
	oldVersion float64
	migration  migration
	// erased: the session was erased here (erasedKey), asked once when
	// its lines waited with no header and no file (passErased), or when a
	// line whose parent no machine has waited (pastErase).
	erased, erasedRead bool
	// belowErased holds the ids of lines passed over as written below an
	// entry erased here, so that the lines below them are too.
	belowErased map[string]bool
	// used is when a line of the session last came (evict.go).
	used time.Time
}

// claim is the first line that claimed an entry id: its hash and origin.
type claim struct {
	sha  [32]byte
	node string
}

// intern is node as one string per node for the run: a node's name in
// each line's claims, read from its message, kept that message's bytes.
func (r *Replicator) intern(node string) string {
	if n, ok := r.nodes[node]; ok {
		return n
	}
	n := strings.Clone(node)
	if len(r.nodes) < maxInterned {
		r.nodes[n] = n
	}
	return n
}

// maxInterned bounds the node names intern keeps: a team's nodes, and
// then some (a node name is whatever a subject holds).
const maxInterned = 1024

func (r *Replicator) session(sid string) *sess {
	s := r.sessions[sid]
	if s == nil {
		s = &sess{sid: sid, seen: map[string]claim{}, firstChild: map[string]string{}}
		r.sessions[sid] = s
		if lg, ok := r.letGoOf[sid]; ok {
			s.letGo = &lg
			delete(r.letGoOf, sid)
		}
	}
	return s
}

// apply takes one event of PI_ALL in stream order. An error ends the run;
// the next one applies the events again from the saved position.
func (r *Replicator) apply(ctx context.Context, ev *eventlog.Event) error {
	s := r.session(ev.SID)
	s.used = r.now()
	switch ev.Op {
	case "":
	case eventlog.OpDelete:
		if ev.Node != r.opts.Node {
			return r.tombstone(ctx, s, ev)
		}
		return r.deletedHere(ctx, s, ev)
	case eventlog.OpErase:
		return r.erase(ctx, s, ev)
	case eventlog.OpRestore:
		if err := r.restore(ctx, s, ev); err != nil {
			return fmt.Errorf("replicator: bring back session %s restored on %s: %w", s.sid, ev.Node, err)
		}
		return nil
	default:
		return nil // a control event this version does not know
	}
	// The strings the session's maps keep for the run, copied: read from
	// the message's headers, each held the whole header block (about
	// 400 bytes a line) for as long as its key lived (a catch-up probe,
	// 2026-12-07).
	ev.ID, ev.ParentID, ev.Node = strings.Clone(ev.ID), strings.Clone(ev.ParentID), r.intern(ev.Node)
	if ev.ID != "" && ev.Type != "session" {
		if prev, ok := s.seen[ev.ID]; !ok {
			s.seen[ev.ID] = claim{sha: ev.Sha, node: ev.Node}
		} else if prev.sha != ev.Sha {
			r.collision(s.sid, ev.ID, prev.node, ev.Node)
		}
		if ev.ParentID != "" {
			if n, ok := s.firstChild[ev.ParentID]; !ok {
				s.firstChild[ev.ParentID] = ev.Node
			} else if n != ev.Node {
				r.mu.Lock()
				r.forkSIDs[s.sid] = struct{}{}
				r.mu.Unlock()
			}
		}
	}
	if ev.Type == "session" && s.origin == "" {
		s.origin = ev.Node
	}
	if ev.Type == "session" {
		if err := r.header(ctx, s, ev); err != nil {
			return err
		}
	}
	if ev.Node == r.opts.Node {
		return nil // our own line: it came from a file here
	}
	if s.lostMigration(ev) {
		r.refused.Add(1)
		return nil
	}
	if s.quarantined != "" {
		r.rejected.Add(1)
		return nil
	}
	if ok, err := r.mayWrite(ctx, s, ev.Node); err != nil || !ok {
		return err
	}
	if ev.Type == "session" && s.header == nil {
		s.header = ev
	}
	s.queue = append(s.queue, ev)
	r.waiting.Add(1)
	return nil
}

// mayWrite reports whether node's lines are written into session s here:
// a trusted node's always, another node's only into a session it began.
func (r *Replicator) mayWrite(ctx context.Context, s *sess, node string) (bool, error) {
	if r.opts.Trusted == nil || slices.Contains(r.opts.Trusted, node) {
		return true, nil
	}
	if s.origin == "" && !s.originRead {
		origin, err := r.all.Origin(ctx, s.sid)
		if err != nil {
			return false, fmt.Errorf("replicator: session %s: %w", s.sid, err)
		}
		s.origin, s.originRead = origin, true
	}
	if s.origin == node {
		return true, nil
	}
	r.untrusted.Add(1)
	if s.untrusted == nil {
		s.untrusted = map[string]bool{}
	}
	if !s.untrusted[node] {
		s.untrusted[node] = true
		r.logger.Warn("lines of an untrusted node on a session it did not begin are not written here (PISYNC_TRUSTED_NODES)",
			"session", s.sid, "node", node, "begun_on", s.origin)
	}
	return false, nil
}

// flush writes what every session can write now. A session whose write
// fails waits (with a growing pause) or, when it can never succeed, is
// quarantined; either way the others go on. It reports whether every
// write so far is durable: only then may the read position move on.
func (r *Replicator) flush(ctx context.Context) (durable bool) {
	now := time.Now()
	var failing, partial int64
	var partialSID string
	for _, s := range r.sessions {
		if !r.flushOne(ctx, s, now) {
			return false
		}
		if s.failures > 0 {
			failing++
		}
		if s.partial && len(s.queue) > 0 {
			partial++
			partialSID = s.sid
		}
	}
	r.failing.Store(failing)
	r.partial.Store(&partialWait{n: partial, example: partialSID})
	if failing == 0 {
		r.failingErr.Store(nil)
	}
	durable = true
	for _, f := range r.files {
		if err := f.sync(); err != nil {
			r.logger.Warn("cannot make a session file durable; retrying", "file", f.path, "err", err)
			durable = false
		}
	}
	if durable {
		r.sweep(now)
	}
	return durable
}

// flushOne writes what session s can write now, or schedules its retry;
// false when ctx ended.
func (r *Replicator) flushOne(ctx context.Context, s *sess, now time.Time) bool {
	if len(s.queue) == 0 && s.trashAfter == nil && !s.refillAll || now.Before(s.retryAt) {
		return true
	}
	queued := len(s.queue)
	err := r.flushSession(ctx, s)
	if err == nil && s.failures > 0 && queued > 0 && len(s.queue) >= queued {
		// Put off, not written: after a write the disk cut short, the
		// file taken back (truncated) reads as one a pi has just
		// written. Still failing: the pause goes on growing, and no
		// recovery is logged between two warnings.
		s.retryAt = now.Add(retryPause(s.failures))
		return true
	}
	if err == nil {
		if s.failures > 0 {
			r.logger.Info("writing a session from another machine works again", "session", s.sid, "failed_attempts", s.failures)
		}
		s.failures, s.retryAt = 0, time.Time{}
		if s.recorded && len(s.queue) == 0 {
			r.lifted(ctx, s)
		}
		return true
	}
	if ctx.Err() != nil {
		return false
	}
	if permanent(err) {
		r.quarantine(ctx, s, err)
		return true
	}
	s.failures++
	msg := err.Error()
	r.failingErr.Store(&msg)
	pause := retryPause(s.failures)
	s.retryAt = now.Add(pause)
	if s.failures == 1 || s.failures%20 == 0 {
		r.logger.Warn("cannot write a session from another machine; retrying", "session", s.sid,
			"err", err, "failed_attempts", s.failures, "retry_in", pause)
	}
	return true
}

// retryPause is the wait after failures writes failed in a row.
func retryPause(failures int) time.Duration {
	return min(100*time.Millisecond<<min(failures, 10), 30*time.Second)
}

// permanent reports whether a write error can never pass by itself.
func permanent(err error) bool {
	return errors.Is(err, ErrUnsafe) || errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.ELOOP) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}

// collision records an entry id two lines claim.
func (r *Replicator) collision(sid, id, first, second string) {
	r.collisions.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.collisionList) < maxListed {
		r.collisionList = append(r.collisionList, Collision{Session: sid, ID: id, Nodes: [2]string{first, second}})
	}
}

func (r *Replicator) flushSession(ctx context.Context, s *sess) error {
	if s.trashAfter != nil {
		// Nothing is written into a file on its way to the trash: a
		// change to it is then the local pi's.
		return r.trashWhenLeft(ctx, s)
	}
	if !s.checked {
		deleted, err := r.Deleted(ctx, s.sid)
		if err != nil {
			return err
		}
		s.deleted = s.deleted || deleted
		s.checked = true
	}
	if s.deleted {
		r.dropQueue(s)
		return nil
	}
	if s.file == nil {
		if err := r.locate(s); err != nil {
			return err
		}
	}
	if s.file == nil {
		if s.away {
			return nil // the lines wait for what the tailer makes of it
		}
		s.refillAll = false // no file here to mend: a new one gets the queue
		if s.header == nil {
			return r.passErased(ctx, s) // or the entries wait for their session's header
		}
		return r.create(ctx, s)
	}
	s.away = false
	busy, ended, err := s.file.busy(r.opts.Idle, r.now())
	if ended > 0 {
		// Once per crash, and a file holds a fragment only until then.
		r.logger.Warn("a partial last line left by a writer that stopped mid-line (pi crashed?) was ended with a newline, as pi does when it opens the file; it stays in the file as a malformed line, and lines from other machines follow it",
			"file", s.file.path, "session", s.sid, "bytes", ended, "unchanged_for", crashAfter(r.opts.Idle))
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errOtherSession) {
		// The file went away (deleted here), or another session's file
		// took its place: what the tailer makes of it decides (away).
		r.dropFile(s)
		s.away = true
		return nil
	}
	if err != nil {
		return err
	}
	s.partial = busy && s.file.frag != (fragment{})
	if busy {
		r.deferred.Add(1)
		return nil
	}
	if s.file.shrunk || s.file.unchecked || s.refillAll {
		upTo := r.startPos // what this run did not read itself
		if s.file.shrunk || s.refillAll {
			// All it read: what PI_ALL holds past it comes through the
			// run's consumer, in order. Up to the stream's end, a
			// session let go of during a catch-up had every line not
			// yet read taken for lost, and written ahead of its turn.
			upTo = r.readPos // 0, none read yet: all of it
		}
		if err := r.refill(ctx, s, upTo); err != nil {
			return err
		}
		s.file.shrunk, s.file.unchecked, s.refillAll = false, false, false
	}
	if err := r.askErased(ctx, s, s.file); err != nil {
		return err
	}
	taken := r.writable(s, s.file)
	if len(taken) == 0 {
		return nil
	}
	lines := raws(taken)
	for _, l := range lines {
		r.tracker.Learn(s.sid, sha256.Sum256(l))
	}
	if err := s.file.appendLines(lines); err != nil {
		// Nothing was written (one write call, or none): the lines
		// wait again, and the file is read afresh before the next try.
		r.requeue(s, taken)
		r.dropFile(s)
		if errors.Is(err, errReplaced) {
			return nil
		}
		s.fewerAfter(err, len(taken))
		return err
	}
	r.linesWritten.Add(int64(len(lines)))
	if len(s.queue) == 0 {
		s.writeCap = 0
	}
	return nil
}

// fewerAfter halves the lines the next write takes when a full disk
// refused a write of n.
func (s *sess) fewerAfter(err error, n int) {
	if errors.Is(err, syscall.ENOSPC) && n > 1 {
		s.writeCap = n / 2
	}
}

// refill queues again, ahead of the rest, every line of the session that
// PI_ALL holds and its file lacks, when the file may have lost lines:
//
//   - it was found shorter, or replaced by a copy that still starts with
//     the line it started with (replica.shrunk): every line PI_ALL holds
//     now is checked;
//   - it is opened for the first time in a run that resumed from a saved
//     position (replica.unchecked): it may have been cut, or restored from
//     an older copy, while the daemon was stopped, and nothing in memory
//     knows its old size. The lines up to that position are checked; those
//     after it come again through the run's own consumer.
//
// Lines already written and delivered are no longer in the queue, so a
// truncated replica kept its hole for good, and a later line whose parent
// was in the hole was written after a parent the file no longer held (as
// an orphan, after a restart). This node's own lines count too: the file
// was their origin, and the tailer knows them (published already), so they
// are not published again. The lines go in stream order, parents first,
// and writable drops those the queue already holds once one is written.
func (r *Replicator) refill(ctx context.Context, s *sess, upTo uint64) error {
	f := s.file
	if f.shrunk && f.head != f.headWas {
		// It starts otherwise: rewritten (pi migrated it to a new
		// format, new ids and all), or emptied. Lines of the old form
		// written back would make it two sessions in one file.
		return nil
	}
	missing, err := r.lacking(ctx, s, upTo)
	if err != nil {
		return fmt.Errorf("replicator: lines of session %s that its file lost: %w", s.sid, err)
	}
	// Lines the run read and has not written yet are not lost: they
	// wait in the queue already.
	queued := make(map[[32]byte]struct{}, len(s.queue))
	for _, ev := range s.queue {
		queued[ev.Sha] = struct{}{}
	}
	missing = slices.DeleteFunc(missing, func(ev *eventlog.Event) bool {
		_, ok := queued[ev.Sha]
		return ok
	})
	if len(missing) > 0 {
		r.logger.Warn("a session file here lost lines (truncated, or restored from an older copy): the lines this machine holds are written back",
			"file", f.path, "session", s.sid, "lines", len(missing))
		r.requeue(s, missing)
	}
	return nil
}

// lacking returns, in stream order and with their bytes, the lines of
// session s in PI_ALL up to stream sequence upTo (0: its last) that s's
// file lacks and would have been written to it: not a line an entry of the
// file already claims the id of (a collision, refused when it came), not
// a losing migration's or an untrusted node's, not this node's own when
// another file here holds the session too (those are that file's). Only
// the lines of the file's own form count: those after the header that is
// its first line and before another header. PI_ALL holds a session pi
// migrated to a new format in both forms, one after the other (migrate.go),
// and lines of the other form would make the file two sessions in one
// that pi cannot read as either. It reads the session's headers first, and
// the bytes only of what is missing, so a whole file costs no read of its
// bodies. The entry ids it reads are noted as seen: an entry whose parent
// was in the hole waits for it instead of going in as an orphan.
func (r *Replicator) lacking(ctx context.Context, s *sess, upTo uint64) ([]*eventlog.Event, error) {
	f := s.file
	if upTo == 0 {
		info, err := r.all.Stream().Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s info: %w", eventlog.AllStream, err)
		}
		upTo = info.State.LastSeq
	}
	ownElsewhere := len(r.tracker.FilesFor(s.sid)) > 1
	var (
		inForm    bool // after the file's header, before another
		want      = map[[32]byte]struct{}{}
		from, prv uint64
	)
	err := r.all.ScanSessionRange(ctx, s.sid, 0, upTo, false, func(ev *eventlog.Event) error {
		defer func() { prv = ev.Seq }()
		switch {
		case ev.Op != "":
			return nil
		case ev.Type == "session":
			// The same header from two nodes is one; a replica made
			// here starts with it mapped (PISYNC_PATH_MAP, a fork's
			// parent: mapHeader).
			inForm = ev.Sha == f.head
			if !inForm {
				var err error
				if inForm, err = r.mappedHeaderIs(ctx, s.sid, ev, f.head); err != nil {
					return err
				}
			}
			return nil
		case !inForm:
			return nil
		}
		if ev.ID != "" {
			if _, ok := s.seen[ev.ID]; !ok {
				s.seen[strings.Clone(ev.ID)] = claim{sha: ev.Sha, node: r.intern(ev.Node)}
			}
		}
		if _, ok := f.shas[ev.Sha]; ok {
			return nil
		}
		if _, ok := f.ids[ev.ID]; ok && ev.ID != "" {
			return nil
		}
		if s.lostMigration(ev) || (ev.Node == r.opts.Node && ownElsewhere) {
			return nil
		}
		if ev.Node != r.opts.Node {
			if ok, err := r.mayWrite(ctx, s, ev.Node); err != nil || !ok {
				return err
			}
		}
		if len(want) == 0 {
			from = prv + 1
		}
		want[ev.Sha] = struct{}{}
		return nil
	})
	if err != nil || len(want) == 0 {
		return nil, err
	}
	var missing []*eventlog.Event
	err = r.all.ScanSessionRange(ctx, s.sid, from, upTo, true, func(ev *eventlog.Event) error {
		if _, ok := want[ev.Sha]; ok && ev.Op == "" {
			delete(want, ev.Sha) // a line published twice goes in once
			missing = append(missing, ev)
		}
		return nil
	})
	return missing, err
}

// mappedHeaderIs reports whether header ev of session sid, mapped as
// create writes it (mapHeader), hashes to sha.
func (r *Replicator) mappedHeaderIs(ctx context.Context, sid string, ev *eventlog.Event, sha [32]byte) (bool, error) {
	raw := ev.Raw
	if raw == nil { // read without its bytes
		if err := r.all.ScanSessionRange(ctx, sid, ev.Seq, ev.Seq, true, func(e *eventlog.Event) error {
			raw = e.Raw
			return nil
		}); err != nil {
			return false, err
		}
	}
	hdr, _, err := mapHeader(raw, r.opts.PathMap, r.opts.Root, ev.File)
	return err == nil && sha256.Sum256(hdr) == sha, nil
}

// requeue puts lines taken for a write that failed back at the front.
func (r *Replicator) requeue(s *sess, taken []*eventlog.Event) {
	s.queue = append(taken, s.queue...)
	r.waiting.Add(int64(len(taken)))
}

func raws(evs []*eventlog.Event) [][]byte {
	out := make([][]byte, len(evs))
	for i, ev := range evs {
		out[i] = ev.Raw
	}
	return out
}

// locate finds the local file of a session, s.file (nil if none). A
// session let go of learns there whether its file is the one it left
// (readAgain).
func (r *Replicator) locate(s *sess) error {
	f, err := r.localFile(s.sid)
	if err != nil {
		return err
	}
	s.file = f
	s.readAgain()
	return nil
}

// localFile is the file of session sid here: one the tailer follows, or
// the file a previous run created at the session's target path; nil if
// none.
func (r *Replicator) localFile(sid string) (*replica, error) {
	for _, p := range r.tracker.FilesFor(sid) {
		if f := r.files[p]; f != nil {
			return f, nil
		}
		f, err := openReplica(p, sid)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errOtherSession) {
			continue
		}
		if err != nil {
			return nil, err
		}
		f.unchecked = r.startPos > 0
		r.files[p] = f
		return f, nil
	}
	return nil, nil
}

// writable takes from the queue, in order, the lines the file can take
// now: lines it lacks whose parent it holds (or that no node has, an
// orphan as in the origin file). Lines it holds already are dropped, and
// so are lines that would break the file for pi: an entry id the file
// holds with other bytes (a collision: both stay in the event log, and
// status lists it) and a line that would close a parentId cycle.
func (r *Replicator) writable(s *sess, f *replica) []*eventlog.Event {
	var out []*eventlog.Event
	for progress := true; progress; {
		progress = false
		rest := s.queue[:0]
		for _, ev := range s.queue {
			if _, ok := f.shas[ev.Sha]; ok || ev.Type == "session" {
				r.waiting.Add(-1) // already there, or a header: the file has one
				progress = true
				continue
			}
			if ev.ID != "" {
				if held, ok := f.ids[ev.ID]; ok {
					r.refuse(s, ev, "collision", "its entry id is held by another line here", held.sha)
					progress = true
					continue
				}
				if f.closesCycle(ev.ID, ev.ParentID) {
					r.refuse(s, ev, "cycle", "it would close a parentId cycle", [32]byte{})
					progress = true
					continue
				}
			}
			if s.writeCap > 0 && len(out) >= s.writeCap {
				rest = append(rest, ev) // the next write's
				continue
			}
			_, parentHere := f.ids[ev.ParentID]
			_, parentKnown := s.seen[ev.ParentID]
			if s.erased && ev.ParentID != "" && !parentHere && (!parentKnown || s.belowErased[ev.ParentID]) {
				r.passBelowErased(s, ev)
				progress = true
				continue
			}
			if ev.ParentID == "" || parentHere || !parentKnown {
				out = append(out, ev)
				f.shas[ev.Sha] = struct{}{}
				if ev.ID != "" {
					f.ids[ev.ID] = entryRef{sha: ev.Sha, parent: ev.ParentID}
				}
				if ev.ParentID != "" {
					f.parents[ev.ParentID] = struct{}{}
				}
				r.waiting.Add(-1)
				progress = true
				continue
			}
			rest = append(rest, ev)
		}
		// What was taken leaves the queue's array too: filtered in
		// place, the array kept every line written, bytes and all, for
		// the whole run, and a catch-up of 160,000 lines outgrew the
		// memory budget (a probe, 2026-12-07).
		clear(s.queue[len(rest):])
		s.queue = rest
	}
	if len(s.queue) == 0 {
		s.queue = nil
	}
	return out
}

// refuse drops a line that would break the file, and says so once per
// session and kind.
func (r *Replicator) refuse(s *sess, ev *eventlog.Event, kind, why string, held [32]byte) {
	r.waiting.Add(-1)
	r.refused.Add(1)
	if kind == "collision" {
		first := r.opts.Node // a line pi wrote here...
		if c, ok := s.seen[ev.ID]; ok && c.sha == held {
			first = c.node // ...or one that came from that node
		}
		r.collision(s.sid, ev.ID, first, ev.Node)
	}
	r.logger.Warn("a line from another machine is not written: "+why, "session", s.sid, "entry", ev.ID,
		"node", ev.Node, "kind", kind)
}

// create writes a new file for a remote session: its mapped header and the
// entries that can follow it.
func (r *Replicator) create(ctx context.Context, s *sess) error {
	hdr, cwd, err := mapHeader(s.header.Raw, r.opts.PathMap, r.opts.Root, s.header.File)
	if err != nil {
		return err // ErrUnsafe: the session is quarantined
	}
	var meta struct {
		Timestamp string `json:"timestamp"`
	}
	json.Unmarshal(s.header.Raw, &meta)
	want, err := target(r.opts.Root, cwd, s.header.File, s.sid, meta.Timestamp)
	if err != nil {
		return err
	}
	// A file a previous run made (the tailer may not list it yet).
	if id, ok := firstHeaderID(want); ok && id == s.sid {
		f, err := openReplica(want, s.sid)
		if err != nil {
			return err
		}
		r.files[want], s.file = f, f
		return r.flushSession(ctx, s)
	}
	f := newReplica(want, s.sid)
	f.shas[sha256.Sum256(hdr)] = struct{}{}
	taken := r.writable(s, f)
	lines := append([][]byte{hdr}, raws(taken)...)
	for _, l := range lines {
		r.tracker.Learn(s.sid, sha256.Sum256(l))
	}
	path, st, err := createFile(r.opts.Root, want, lines)
	if err != nil {
		r.requeue(s, taken)
		s.fewerAfter(err, len(taken))
		return err
	}
	f = made(path, s.sid, lines, st)
	r.files[path], s.file = f, f
	r.filesCreated.Add(1)
	r.linesWritten.Add(int64(len(lines)))
	r.logger.Info("new session from another machine", "session", s.sid, "file", path, "node", s.header.Node)
	return nil
}

// tombstone moves this machine's copy of a session deleted elsewhere into
// the trash folder (never unlinks it), and remembers the deletion. A copy a
// local pi wrote within the last crashAfter(Idle) waits (trashWhenLeft):
// pi may have the session open, and a file moved away under it comes back
// at its next line as a file without a header, which pi cannot open and
// the tailer does not publish.
func (r *Replicator) tombstone(ctx context.Context, s *sess, ev *eventlog.Event) error {
	if r.opts.KeepDeleted {
		return nil
	}
	if s.file == nil {
		if err := r.locate(s); err != nil {
			return fmt.Errorf("replicator: find session %s deleted on %s: %w", s.sid, ev.Node, err)
		}
	}
	if s.file != nil {
		snap, written, err := s.file.localWrite(crashAfter(r.opts.Idle), r.now())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("replicator: session %s deleted on %s: %w", s.sid, ev.Node, err)
		}
		if err == nil && written {
			s.trashAfter, s.trashSeen = ev, snap
			r.logger.Info("session deleted on another machine, and written here within the last minute: it goes to the trash once left alone that long, and stays if written again",
				"session", s.sid, "node", ev.Node, "file", s.file.path, "wait", crashAfter(r.opts.Idle))
			return nil
		}
	}
	return r.trash(ctx, s, ev)
}

// dropQueue passes over every line waiting in s.
func (r *Replicator) dropQueue(s *sess) {
	r.waiting.Add(-int64(len(s.queue)))
	s.queue = nil
}

// deletedHere records this machine's own deletion of the session (its
// tombstone, back from the hub): the other machines' lines of it are not
// written here after it, as after another machine's deletion, until it is
// restored. Before, a teammate's later lines waited here for good, for a
// file the user had deleted, and a restart that read the session's header
// again made that file anew from them.
func (r *Replicator) deletedHere(ctx context.Context, s *sess, ev *eventlog.Event) error {
	if s.file != nil {
		if _, err := os.Lstat(s.file.path); err == nil {
			return nil // a file of it is here again (its restore follows)
		}
		r.dropFile(s)
	}
	s.deleted, s.checked = true, true
	r.dropQueue(s)
	if _, err := r.state.Put(ctx, deletedKey(s.sid), []byte(ev.Node)); err != nil {
		return fmt.Errorf("replicator: record deletion of %s here: %w", s.sid, err)
	}
	return nil
}

// trashWhenLeft ends a deletion that waits for the local pi (tombstone):
// the file written again since is kept (the session goes on here, and its
// deletion is not applied here); left alone for crashAfter(Idle), or gone,
// it is trashed.
func (r *Replicator) trashWhenLeft(ctx context.Context, s *sess) error {
	ev := s.trashAfter
	st, err := os.Lstat(s.file.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !s.trashSeen.same(seenAt(st, r.now())):
		s.trashAfter = nil
		r.kept.Add(1)
		r.logger.Warn("a session deleted on another machine was written here since: it stays here (delete it here too if it should go)",
			"session", s.sid, "node", ev.Node, "file", s.file.path)
		return nil
	case r.now().Sub(s.trashSeen.since) < crashAfter(r.opts.Idle):
		return nil // still waiting
	}
	s.trashAfter = nil
	return r.trash(ctx, s, ev)
}

// trash moves the session's copy, if any, to the trash and records the
// deletion.
func (r *Replicator) trash(ctx context.Context, s *sess, ev *eventlog.Event) error {
	s.deleted = true
	r.dropQueue(s)
	if s.file != nil {
		path := s.file.path
		undo := r.tracker.Forget(path)
		dst, err := r.moveToTrash(path)
		if errors.Is(err, fs.ErrNotExist) {
			undo()
			r.dropFile(s) // deleted here meanwhile, as on ev.Node
		} else if err != nil {
			undo()
			// The copy stays here, so this machine keeps the session, as
			// with PISYNC_DELETE=ignore, and no deletion is recorded: a
			// kept file must not look like a restored one after a restart
			// (which would undo the deletion everywhere).
			r.logger.Warn("cannot move a session deleted elsewhere to the trash; keeping it", "file", path, "err", err)
			s.deleted = false
			return nil
		} else {
			r.dropFile(s)
			r.rememberTrashed(s.sid, path, dst)
			r.trashed.Add(1)
			r.logger.Info("session deleted on another machine; moved to trash", "session", s.sid, "node", ev.Node, "trash", dst)
		}
	}
	// Recorded once no copy is left here; if that fails, the run ends and
	// the tombstone is applied again.
	if _, err := r.state.Put(ctx, deletedKey(s.sid), []byte(ev.Node)); err != nil {
		return fmt.Errorf("replicator: record deletion of %s: %w", s.sid, err)
	}
	return nil
}

// restore brings back a session whose file reappeared on ev.Node after a
// deletion: the deletion record goes, and a machine without a file of the
// session gets one again with every line published before the restore,
// this machine's own included (its file went to the trash, or was deleted
// here). Lines after the restore follow as usual.
func (r *Replicator) restore(ctx context.Context, s *sess, ev *eventlog.Event) error {
	s.trashAfter = nil // a deletion waiting for the local pi is undone too
	s.away = false     // what became of a file that went away: restored
	if err := r.state.Delete(ctx, deletedKey(s.sid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("clear deletion record: %w", err)
	}
	s.deleted, s.checked = false, true
	if ev.Node == r.opts.Node {
		// The file is here: the tailer published the restore. What other
		// machines wrote while it was deleted here was passed over: the
		// file gets it now (it waited for the next restart).
		s.refillAll = true
		return nil
	}
	if s.file != nil {
		if _, err := os.Stat(s.file.path); errors.Is(err, fs.ErrNotExist) {
			r.dropFile(s) // deleted here, as the user did on ev.Node
		}
	}
	if s.file == nil {
		if err := r.locate(s); err != nil {
			return err
		}
	}
	if s.file != nil {
		return nil // never deleted here (PISYNC_DELETE=ignore, say)
	}
	var lines []*eventlog.Event
	err := r.all.ScanSession(ctx, s.sid, true, func(e *eventlog.Event) error {
		if e.Seq < ev.Seq && e.Op == "" {
			lines = append(lines, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the session back: %w", err)
	}
	for _, e := range lines {
		if e.Type == "session" && s.header == nil {
			s.header = e
		}
	}
	r.waiting.Add(int64(len(lines)))
	s.queue = append(lines, s.queue...)
	r.restored.Add(1)
	r.logger.Info("session restored on another machine; bringing it back", "session", s.sid, "node", ev.Node, "lines", len(lines))
	return nil
}

// dropFile forgets the session's file here: it is gone, or in the trash.
func (r *Replicator) dropFile(s *sess) {
	delete(r.files, s.file.path)
	s.file = nil
}

// moveToTrash renames a replica into the trash folder of the sessions dir,
// or, for a file behind a linked project folder on another disk (a rename
// cannot cross disks, and a copy is not a move), into a trash folder inside
// that folder: hidden, so neither pi nor the tailer lists it.
func (r *Replicator) moveToTrash(path string) (string, error) {
	rel, _ := filepath.Rel(r.opts.Root, path)
	name := time.Now().UTC().Format("20060102T150405Z") + "_" + strings.ReplaceAll(filepath.ToSlash(rel), "/", "_")
	trash := filepath.Join(r.opts.Root, TrashDir)
	if err := safeMkdir(r.opts.Root, trash); err != nil {
		return "", fmt.Errorf("trash folder: %w", err)
	}
	// safeMkdir takes a link at the top, as for a project folder linked in
	// by hand; the trash through one would leave the sessions folder, and
	// erase would not look there.
	if st, err := os.Lstat(trash); err != nil || !st.IsDir() {
		return "", fmt.Errorf("trash folder %s is not a folder (a link?): nothing is moved out of the sessions folder; make it a folder of its own", trash)
	}
	dst := freeName(trash, name)
	err := os.Rename(path, dst)
	if !errors.Is(err, syscall.EXDEV) {
		return dst, err
	}
	trash = filepath.Join(filepath.Dir(path), TrashDir)
	if err := os.Mkdir(trash, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("trash folder: %w", err)
	}
	if st, err := os.Lstat(trash); err != nil || !st.IsDir() {
		return "", fmt.Errorf("trash folder %s is not a folder", trash)
	}
	dst = freeName(trash, name)
	return dst, os.Rename(path, dst)
}

// freeName is the first free numbered(dir/name, i): a rename would replace
// an earlier copy of the same file trashed within the same second. Only the
// replicator writes the trash.
func freeName(dir, name string) string {
	for i := 0; ; i++ {
		p := numbered(filepath.Join(dir, name), i)
		if _, err := os.Lstat(p); err != nil {
			return p // free (or unreadable, and the rename will say why)
		}
	}
}

// Deleted reports whether a deletion of the session elsewhere was recorded
// and no restore came since; the tailer asks it too, to announce a file of
// such a session that shows up here as a restore. A failed read is an
// error, not "no": writing on would revive a session the user deleted.
func (r *Replicator) Deleted(ctx context.Context, sid string) (bool, error) {
	_, err := r.state.Get(ctx, deletedKey(sid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read deletion record: %w", err)
	}
	return true, nil
}

// KnownLines adds, for the tailer, the hashes of a session's lines that
// other nodes published (in PI_ALL), including each remote header as the
// replicator writes it here (path-mapped).
func (r *Replicator) KnownLines(ctx context.Context, sid string, add func([32]byte)) error {
	all := r.all
	var headers []uint64
	err := all.ScanSession(ctx, sid, false, func(ev *eventlog.Event) error {
		add(ev.Sha)
		if ev.Type == "session" && ev.Node != r.opts.Node {
			headers = append(headers, ev.Seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, seq := range headers {
		m, err := all.Stream().GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if hdr, _, err := mapHeader(m.Data, r.opts.PathMap, r.opts.Root, m.Header.Get(eventlog.HdrFile)); err == nil {
			add(sha256.Sum256(hdr))
		}
	}
	return nil
}
