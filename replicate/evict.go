package replicate

import (
	"slices"
	"time"
)

// What the replicator knows of a session, and of its file here, is kept
// for the run: every entry id and hash of its lines (about 480 bytes a
// line in all). A catch-up of 8,000 sessions of 40 lines kept 250 MB of it
// after the last file was written, and the memory budget's Go limit was
// within reach at 600,000 lines (a probe, 2026-12-07). So once the
// sessions held know more than maxKnownLines lines, those left alone for
// letGoAfter are let go of, the longest alone first, down to half of it:
// nothing waits in them, and nothing of theirs is in flight or out of the
// ordinary. A session let go of with a file here is read again when a line
// of it comes: its file's lines from the file. What memory knew of the
// file (its identity, size and first line: letGo) is kept, and tells a
// file cut short or replaced meanwhile, which then gets every line of the
// session PI_ALL holds up to the position read that it lacks (refillAll,
// as for a file found cut short: readAgain). What is lost is what a
// restart loses too: which node's line came first for an entry id, and
// for a parent (a collision is then reported with this node's name, a fork
// found later or not at all); and the ids of lines PI_ALL holds that the
// file lacks on purpose (refused, an untrusted node's), so that a line
// whose parent is one of those goes in without it rather than waiting.
//
// Sessions written to within letGoAfter are kept, past the cap, up to
// twice it (about 96 MB): letting go of them by age alone thrashed. A session of
// 120,000 lines and 200 sessions written at 2,000 lines a second were let
// go of every second and read again at their next line, each a read of
// its file and of its lines in PI_ALL, and new sessions waited minutes
// behind those reads (a probe, 2026-12-07).
const (
	maxKnownLines = 100_000
	letGoAfter    = 30 * time.Second
	// sweepEvery spaces the counts of what the sessions know.
	sweepEvery = time.Second
)

// Under the cap too, a session of at most smallSession lines left alone
// for forgetAfter is let go of: an idle daemon kept what it knew of every
// session a day's work had touched, for the run. That is a part of what a
// soak's idle daemon held (39 MB live against 11 MB after a restart on the
// same data, 2026-12-07): about 3.5 MB for 800 sessions of 25 lines in a
// run of that shape, the rest being the embedded server's pools and the
// projection's. Read again, such a session costs a read of its file, a
// millisecond or so; a longer one is kept, since its file costs more to
// read than its lines to keep.
const (
	smallSession = 1_000
	forgetAfter  = 10 * time.Minute
)

// sweep lets go of sessions while the sessions know more than r.knownCap
// lines (maxKnownLines; above): those left alone for letGoAfter, down to
// half of it, and past twice it any, the longest alone first. Small ones
// left alone for forgetAfter go whatever the count.
func (r *Replicator) sweep(now time.Time) {
	if now.Sub(r.swept) < sweepEvery {
		return
	}
	r.swept = now
	known := 0
	for _, s := range r.sessions {
		n := s.known()
		if n <= smallSession && now.Sub(s.used) >= forgetAfter && s.plain() {
			r.release(s) // deleting while ranging: the loop sees it no more
			continue
		}
		known += n
	}
	if known <= r.knownCap {
		return
	}
	var idle []*sess
	for _, s := range r.sessions {
		if s.plain() {
			idle = append(idle, s)
		}
	}
	slices.SortFunc(idle, func(a, b *sess) int { return a.used.Compare(b.used) })
	for _, s := range idle {
		recent := now.Sub(s.used) < letGoAfter
		if known <= r.knownCap/2 || recent && known <= 2*r.knownCap {
			break
		}
		known -= s.known()
		r.release(s)
	}
}

// release lets go of s, keeping what tells its file apart (letGo).
func (r *Replicator) release(s *sess) {
	if f := s.file; f != nil {
		delete(r.files, f.path)
		r.letGoOf[s.sid] = letGo{size: f.size, dev: f.dev, ino: f.ino, head: f.head}
	}
	delete(r.sessions, s.sid)
	r.letGo.Add(1)
}

// known is how many lines s knows of: its claims, or its file's lines if
// more. Each line is in both (about 480 bytes for the two): counted in
// each, the cap held half the lines it was set for, and the busy sessions
// of a writer of 2,000 lines a second across 200 were let go of past
// 150,000 lines (a probe, 2026-12-07).
func (s *sess) known() int {
	n := len(s.seen)
	if s.file != nil {
		n = max(n, len(s.file.shas))
	}
	return n
}

// letGo is what is kept of a session let go of with a file here: enough to
// tell, at its next line, whether its file is still the one read and no
// shorter, as memory would have (replica.refresh).
type letGo struct {
	size     int64
	dev, ino uint64
	head     [32]byte
}

// readAgain decides, for a session let go of whose file was just located
// (s.file, nil if none), whether the file is compared with PI_ALL: only
// when it is another file than the one let go of, or shorter, or starts
// otherwise, which may have lost lines meanwhile. Compared every time, a
// session let go of was a scan of PI_ALL for its subject at each return,
// the stream's every block for a session whose lines are spread through
// it; 200 sessions written at once past twice the cap went from 700 to 400
// lines a second at 250 lines each (a third of the CPU in the server's
// scan), and to 2-9 lines a second at 1,000 each (a probe, 2026-12-07).
func (s *sess) readAgain() {
	lg, f := s.letGo, s.file
	s.letGo = nil
	if lg == nil || f == nil {
		return
	}
	if f.dev == lg.dev && f.ino == lg.ino && f.size >= lg.size && f.head == lg.head {
		f.unchecked = false // checked before it was let go of (plain)
		return
	}
	s.refillAll = true
}

// plain reports whether s may be let go of and read again later as at a
// restart: nothing waits in it, its file is durable, and none of what
// only memory holds of it (a deletion waiting for the local pi, a
// quarantine, a migration, failures, a refill due) would be lost.
func (s *sess) plain() bool {
	return len(s.queue) == 0 && s.trashAfter == nil && !s.refillAll && s.quarantined == "" && !s.recorded &&
		s.failures == 0 && !s.away && !s.partial && !s.oldHeader && s.migration.Winner == "" && len(s.migration.Losers) == 0 &&
		s.belowErased == nil && s.untrusted == nil && (s.file == nil || !s.file.dirty && !s.file.shrunk && !s.file.unchecked)
}
