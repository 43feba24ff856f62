package admit

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Limits bound what one origin node may send.
type Limits struct {
	// MaxLine is the longest line admitted.
	MaxLine int
	// SessionsPerHour is how many new sessions one origin node may start
	// in an hour (measured on the hub's clock, so a catch-up after an
	// outage is not a burst), with up to burstHours' worth at once; 0
	// means no limit.
	SessionsPerHour int
	// BytesPerHour is how many bytes of lines one origin may send in an
	// hour, burstHours' worth at once; 0 means no limit.
	BytesPerHour int64
}

// Lines tells whether a node has published lines of a session: the rule
// for who may delete, restore or erase it.
type Lines interface {
	HasLines(ctx context.Context, node, sid string) (bool, error)
}

// quarantineAfter is how many rejected events of one origin's session put
// the rest of that origin's events for the session in quarantine.
const quarantineAfter = 8

// maxPairs bounds the per-(origin, session) records an attacker can make
// us keep; past it, rejections are still counted per origin.
const maxPairs = 100_000

// Gate is the admission point: Admit decides for every remote event,
// counts what it rejects per origin node and session, logs the first
// rejection of each pair, and quarantines a pair that keeps failing.
// Safe for concurrent use.
type Gate struct {
	self   string
	limits Limits
	lines  Lines
	logger *slog.Logger
	// trusted are the nodes named in PISYNC_TRUSTED_NODES (nil: every
	// node, *): see authority.
	trusted []string

	mu      sync.Mutex
	origins map[string]*origin
	pairs   map[pair]*pairState

	admitted, rejected atomic.Int64
	own                atomic.Int64 // of admitted: this node's own, back from the hub

	ownLog      OwnLog                // nil: not asked (twin.go)
	ownPutOff   bool                  // answers are put off until SettleOwn (twin.go)
	ownPending  []string              // the sessions whose answer is put off
	ownFile     func(sid string) bool // whether a file here holds a session (SettleOwn)
	twins       int64                 // sessions of this node id that ownLog does not hold
	twinExample string
}

type pair struct{ node, sid string }

type pairState struct {
	hasLines    bool // admitted at least one line: authority over the session
	started     bool // its header was admitted (counted against the quota)
	ownChecked  bool // a line of this node id: this machine's log was asked (twin.go)
	rejected    int
	quarantined Reason
	logged      []Reason // reasons said in the log once each: a handful
}

type origin struct {
	sessions, bytes bucket
	rejected        int64
	byReason        map[Reason]int64
}

// New returns a gate for node self; lines answers for history the gate
// has not seen in this run.
func New(self string, limits Limits, lines Lines, logger *slog.Logger) *Gate {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if limits.MaxLine <= 0 {
		limits.MaxLine = 64 << 20
	}
	return &Gate{self: self, limits: limits, lines: lines, logger: logger,
		origins: map[string]*origin{}, pairs: map[pair]*pairState{}}
}

// Admit returns nil when ev may enter this machine, an error wrapping
// eventlog.ErrRejected when it is passed over, or another error when the
// decision could not be made (PI_ALL unreadable): the caller retries.
// at is when the hub stored the event.
func (g *Gate) Admit(ctx context.Context, ev *eventlog.Event, at time.Time) error {
	if r := Check(ev, g.limits.MaxLine); r != nil {
		return g.reject(r)
	}
	k := pair{ev.Node, ev.SID}
	g.mu.Lock()
	p := g.pairs[k]
	askOwn := ev.Op == "" && ev.Node == g.self && g.ownLog != nil && g.firstOwn(k)
	g.mu.Unlock()
	if p != nil && p.quarantined != "" {
		return g.reject(&Rejection{Node: ev.Node, SID: ev.SID, Reason: Quarantined, Detail: string(p.quarantined)})
	}
	if ev.Op != "" {
		if err := g.authority(ctx, ev, p); err != nil {
			return err
		}
		g.count(ev)
		return nil
	}
	if askOwn {
		g.checkOwn(ctx, ev)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if ev.Node != g.self {
		o := g.origin(ev.Node)
		if ev.Type == "session" && (p == nil || !p.started) && g.limits.SessionsPerHour > 0 &&
			!o.sessions.take(at, 1, float64(g.limits.SessionsPerHour)) {
			return g.rejectLocked(&Rejection{Node: ev.Node, SID: ev.SID, Reason: SessionQuota,
				Detail: "raise PISYNC_REMOTE_SESSIONS_PER_HOUR if this node is yours; what is rejected meanwhile is not copied here later"}, true)
		}
		if g.limits.BytesPerHour > 0 && !o.bytes.take(at, float64(len(ev.Raw)), float64(g.limits.BytesPerHour)) {
			return g.rejectLocked(&Rejection{Node: ev.Node, SID: ev.SID, Reason: ByteQuota,
				Detail: "raise PISYNC_REMOTE_BYTES_PER_HOUR if this node is yours; what is rejected meanwhile is not copied here later"}, false)
		}
	}
	if p = g.pair(k); p != nil {
		p.hasLines = true
		p.started = p.started || ev.Type == "session"
	}
	g.count(ev)
	return nil
}

// count counts ev admitted, and apart when it is this node's own.
func (g *Gate) count(ev *eventlog.Event) {
	g.admitted.Add(1)
	if ev.Node == g.self {
		g.own.Add(1)
	}
}

// ErasedLines records that node's lines of session sid were passed over as
// erased: node has authority over the session as if they were admitted
// (authority). Only the downloader knows it, from the sealed lines' hub
// subject, which only node (or the hub's operator) may publish on.
func (g *Gate) ErasedLines(node, sid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p := g.pair(pair{node, sid}); p != nil {
		p.hasLines = true
	}
}

// Trust narrows who may delete, restore or erase a session that this
// node or a trusted node has lines of to this node and nodes (nil: every
// node, the default). Call it before the first Admit.
func (g *Gate) Trust(nodes []string) { g.trusted = nodes }

// authority admits a delete, restore or erase only from a node that has
// published lines of the session (this node's own always). With trust
// narrowed (Trust), an untrusted node's lines give it no say over a session
// that this node or a trusted node has lines of: one line of its own,
// admitted into the log though not written into the file, would otherwise
// let a teammate erase the user's own session on every machine.
func (g *Gate) authority(ctx context.Context, ev *eventlog.Event, p *pairState) error {
	if ev.Node == g.self {
		return nil
	}
	if p == nil || !p.hasLines {
		ok, err := g.lines.HasLines(ctx, ev.Node, ev.SID)
		if err != nil {
			return err
		}
		if !ok {
			return g.reject(&Rejection{Node: ev.Node, SID: ev.SID, Reason: NoAuthority,
				Detail: ev.Op + " from a node that never wrote the session"})
		}
		g.mu.Lock()
		if p := g.pair(pair{ev.Node, ev.SID}); p != nil {
			p.hasLines = true
		}
		g.mu.Unlock()
	}
	if g.trusted == nil || slices.Contains(g.trusted, ev.Node) {
		return nil
	}
	for _, n := range append([]string{g.self}, g.trusted...) {
		ok, err := g.lines.HasLines(ctx, n, ev.SID)
		if err != nil {
			return err
		}
		if ok {
			return g.reject(&Rejection{Node: ev.Node, SID: ev.SID, Reason: NoAuthority,
				Detail: ev.Op + " from an untrusted node of a session " + n + " wrote (PISYNC_TRUSTED_NODES)"})
		}
	}
	return nil
}

// Reject counts an event the caller passed over itself (a broken chunk
// run, a subject that is not a session's).
func (g *Gate) Reject(node, sid, reason, detail string) {
	g.reject(&Rejection{Node: node, SID: sid, Reason: Reason(reason), Detail: detail})
}

var _ eventlog.Admitter = (*Gate)(nil)

func (g *Gate) reject(r *Rejection) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rejectLocked(r, false)
}

// rejectLocked counts r; quarantine puts the pair in quarantine at once.
func (g *Gate) rejectLocked(r *Rejection, quarantine bool) error {
	g.rejected.Add(1)
	o := g.origin(r.Node)
	o.rejected++
	o.byReason[r.Reason]++
	p := g.pair(pair{r.Node, r.SID})
	first := p == nil && o.rejected == 1
	if p != nil && (notTheOrigins(r.Reason) || r.SID == "") {
		// No session to quarantine: a subject that names none, or a
		// sealed line's that names a token.
		first = o.byReason[r.Reason] == 1
	} else if p != nil {
		p.rejected++
		// The first of each reason: a session's first rejection alone
		// left a tampered line's later moves and replays unsaid.
		if first = !slices.Contains(p.logged, r.Reason); first {
			p.logged = append(p.logged, r.Reason)
		}
		if p.quarantined == "" && (quarantine || p.rejected >= quarantineAfter) {
			p.quarantined = r.Reason
			g.logger.Warn("quarantined a session from another node: its further events are passed over",
				"node", r.Node, "session", r.SID, "reason", r.Reason)
		}
	}
	if first {
		g.logger.Warn("rejected an event from another node", "node", r.Node, "session", r.SID,
			"reason", r.Reason, "detail", r.Detail)
	}
	return r
}

// notTheOrigins reports whether a rejection is one any client of the hub
// can cause in an origin's name without its key: a sealed line of the
// origin stored again (replayed, or erased: a line of a session erased
// since, which also comes from an origin away during the erase), or a line
// in clear while encryption is on (unsealed), or a sealed line while it is
// off with no key to tell it from noise (sealed), or one more sealed line
// this machine has no key for from a node with as many sessions held for
// one as it may have (held-limit). They count, but for no quarantine of
// the origin's session: nine of them stopped that session's copying from
// its origin on every workstation.
func notTheOrigins(r Reason) bool {
	switch r {
	case Reason(eventlog.RejectReplayed), Reason(eventlog.RejectUnsealed), Reason(eventlog.RejectErased), Reason(eventlog.RejectSealed), Reason(eventlog.RejectHeldLimit):
		return true
	}
	return false
}

func (g *Gate) origin(node string) *origin {
	o := g.origins[node]
	if o == nil {
		o = &origin{byReason: map[Reason]int64{}}
		g.origins[node] = o
	}
	return o
}

// pair returns the record of k, nil once maxPairs are kept.
func (g *Gate) pair(k pair) *pairState {
	p := g.pairs[k]
	if p == nil && len(g.pairs) < maxPairs {
		p = &pairState{}
		g.pairs[k] = p
	}
	return p
}

// burstHours is how many hours' worth of a quota an origin may spend at
// once. A machine that joins the team forwards every session it already
// holds within seconds of hub time: with one hour's worth, a laptop of
// 3,000 sessions had about 1,000 of them rejected on every other machine
// for good (the copy goes on past what it rejects). Ten hours' worth takes
// a backlog of 20,000 sessions at the default, the scale pisyncd is built
// for, and still bounds a flood; past it, the hourly rate.
const burstHours = 10

// bucket is a token bucket refilled at rate per hour up to burstHours'
// worth, on the clock of the times it is given; it starts full.
type bucket struct {
	tokens float64
	last   time.Time
}

func (b *bucket) take(at time.Time, n, perHour float64) bool {
	size := perHour * burstHours
	if b.last.IsZero() {
		b.tokens, b.last = size, at
	}
	if at.After(b.last) {
		b.tokens = min(size, b.tokens+perHour*at.Sub(b.last).Hours())
		b.last = at
	}
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// Stats are the gate's counters.
type Stats struct {
	Admitted int64 `json:"admitted"`
	// Own counts the admitted events that are this node's own lines,
	// back from the hub (every line written here comes back so).
	Own      int64 `json:"ownAdmitted"`
	Rejected int64 `json:"rejected"`
	// NotWrittenHere counts the sessions of this node id that the hub
	// holds and this machine never wrote (twin.go); NotWrittenExample
	// names one.
	NotWrittenHere    int64                  `json:"ownSessionsNotWrittenHere,omitempty"`
	NotWrittenExample string                 `json:"ownSessionNotWrittenHere,omitempty"`
	ByOrigin          map[string]OriginStats `json:"byOrigin,omitempty"`
	Quarantined       []QuarantinedSession   `json:"quarantined,omitempty"`
}

// OriginStats count one origin node's rejected events by reason.
type OriginStats struct {
	Rejected int64            `json:"rejected"`
	ByReason map[Reason]int64 `json:"byReason"`
}

// QuarantinedSession is one origin's session whose events are passed over.
type QuarantinedSession struct {
	Node    string `json:"node"`
	Session string `json:"session"`
	Reason  Reason `json:"reason"`
}

// maxListed bounds the quarantined sessions Stats lists.
const maxListed = 50

// Stats returns the counters.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Admitted: g.admitted.Load(), Own: g.own.Load(), Rejected: g.rejected.Load(), NotWrittenHere: g.twins, NotWrittenExample: g.twinExample}
	for node, o := range g.origins {
		if o.rejected == 0 {
			continue
		}
		if s.ByOrigin == nil {
			s.ByOrigin = map[string]OriginStats{}
		}
		by := make(map[Reason]int64, len(o.byReason))
		for r, n := range o.byReason {
			by[r] = n
		}
		s.ByOrigin[node] = OriginStats{Rejected: o.rejected, ByReason: by}
	}
	for k, p := range g.pairs {
		if p.quarantined != "" {
			s.Quarantined = append(s.Quarantined, QuarantinedSession{Node: k.node, Session: k.sid, Reason: p.quarantined})
		}
	}
	sort.Slice(s.Quarantined, func(i, j int) bool {
		a, b := s.Quarantined[i], s.Quarantined[j]
		return a.Node < b.Node || a.Node == b.Node && a.Session < b.Session
	})
	if len(s.Quarantined) > maxListed {
		s.Quarantined = s.Quarantined[:maxListed]
	}
	return s
}
