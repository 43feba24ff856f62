package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// NodeMaxLinks is how many leaf links one registered node may hold to a
// hub node at once. A workstation holds one (the hub closes the older of
// two with one server name); the rest is room for a link being replaced.
const NodeMaxLinks = 4

// LinkGuard keeps each registered node of a hub to NodeMaxLinks leaf
// links, and as many client connections. nats-server bounds a team's
// links only as a whole (PISYNC_HUB_TEAM_MAX_LINKS): one node, its key
// stolen or its software gone wrong, could hold every link of its team, so
// that a teammate whose link dropped (a laptop asleep, a restart) could
// not link again for as long as it went on. The guard learns whose key
// each connection holds from the system account's connect events, and
// counts each node's connections against the server's own list of them:
// right after a connect (the event comes as the connection authenticates,
// a moment before the server lists it) and every second. A node's newest
// connections past the bound are closed, so that a flood holds its places
// for a moment, not for good; the log names the node. A stock nats-server
// running the same configuration has no guard.
type LinkGuard struct {
	srv    *Server
	logger *slog.Logger
	max    int
	closed atomic.Int64

	// Owned by Run: whose each connection is, by id, from the connect
	// events until the disconnect's (or until the server has not listed
	// it for forgetAfter: an event lost); when each node's excess was
	// last logged, and what was closed of it since.
	conns  map[uint64]conn
	warned map[string]time.Time
	since  map[string]int
}

// conn is what the guard knows of a connection.
type conn struct {
	key, team, kind string
	seen            time.Time // last listed by the server, or its connect
}

const (
	// recheckAfter is how soon after a connect its node's connections are
	// counted: the server lists a connection a moment after its event.
	recheckAfter = 20 * time.Millisecond
	// sweepEvery is how often every team's connections are counted.
	sweepEvery = time.Second
	// forgetAfter: a connection the server has not listed for this long
	// is gone, its disconnect event lost.
	forgetAfter = 5 * time.Second
)

// NewLinkGuard returns the guard of srv's links, bound to max links a
// node (NodeMaxLinks when max is 0).
func NewLinkGuard(srv *Server, max int, logger *slog.Logger) *LinkGuard {
	if max <= 0 {
		max = NodeMaxLinks
	}
	return &LinkGuard{srv: srv, logger: logger, max: max,
		conns: map[uint64]conn{}, warned: map[string]time.Time{}, since: map[string]int{}}
}

// Closed is how many connections the guard has closed.
func (g *LinkGuard) Closed() int64 { return g.closed.Load() }

// Run guards until ctx ends. A hub without authorization has nothing to
// guard (anyone may link), and Run returns at once.
func (g *LinkGuard) Run(ctx context.Context) error {
	if g.srv.hub == nil || !g.srv.hub.Auth {
		return nil
	}
	nc, err := g.srv.connectSystem(nats.Name("pisyncd-hub-links"))
	if err != nil {
		return fmt.Errorf("link guard: %w", err)
	}
	defer nc.Close()
	// A buffer for a flood's events; one that overflows loses events: a
	// connection whose connect was lost is not counted (the sweep forgets
	// those whose disconnect was).
	ch := make(chan *nats.Msg, 8192)
	for _, subj := range []string{"$SYS.ACCOUNT.*.CONNECT", "$SYS.ACCOUNT.*.DISCONNECT"} {
		if _, err := nc.ChanSubscribe(subj, ch); err != nil {
			return fmt.Errorf("link guard: %s: %w", subj, err)
		}
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("link guard: %w", err)
	}
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			if g.handle(m.Data) && !pending {
				recheck.Reset(recheckAfter)
				pending = true
			}
		case <-recheck.C:
			pending = false
			g.count()
		case <-sweep.C:
			g.count()
		}
	}
}

// linkEvent is what the guard reads of a connect or disconnect event.
type linkEvent struct {
	Type   string            `json:"type"`
	Server server.ServerInfo `json:"server"`
	Client server.ClientInfo `json:"client"`
}

// guarded are the kinds of connection the guard bounds: a node's leaf
// links, and its client connections where the hub has a client listener
// it can reach (a workstation never makes one, but each takes a place of
// its team's, which pisyncd's own connection to the team needs).
var guarded = map[string]bool{"Leafnode": true, "Client": true}

// handle takes a connect or disconnect event; it reports a connect of a
// node's, whose connections are to be counted.
func (g *LinkGuard) handle(data []byte) bool {
	var ev linkEvent
	if err := json.Unmarshal(data, &ev); err != nil || !guarded[ev.Client.Kind] || ev.Client.User == "" {
		return false
	}
	if ns := g.srv.nats(); ns == nil || ev.Server.ID != ns.ID() {
		// Another hub node's (the system account spans the cluster):
		// its connection ids are its own, and its guard bounds them.
		return false
	}
	switch ev.Type {
	case server.DisconnectEventMsgType:
		delete(g.conns, ev.Client.ID)
		return false
	case server.ConnectEventMsgType:
		g.conns[ev.Client.ID] = conn{key: ev.Client.User, team: ev.Client.Account, kind: ev.Client.Kind, seen: time.Now()}
		return true
	}
	return false
}

// count counts each node's connections the server lists, and closes the
// newest of a node's past the bound.
func (g *LinkGuard) count() {
	if len(g.conns) == 0 {
		return
	}
	type place struct{ team, kind string }
	places := map[place]bool{}
	for _, c := range g.conns {
		places[place{c.team, c.kind}] = true
	}
	now := time.Now()
	for p := range places {
		live, err := g.live(p.kind, p.team)
		if err != nil {
			g.logger.Debug("link guard: the team's connections", "team", p.team, "err", err)
			continue
		}
		held := map[string][]uint64{} // node key → its connections listed
		for id, c := range g.conns {
			if c.team != p.team || c.kind != p.kind {
				continue
			}
			if !live[id] {
				if now.Sub(c.seen) > forgetAfter {
					delete(g.conns, id)
				}
				continue
			}
			c.seen = now
			g.conns[id] = c
			held[c.key] = append(held[c.key], id)
		}
		for key, ids := range held {
			if len(ids) <= g.max {
				continue
			}
			name, ok := g.node(key)
			if !ok {
				continue // pisyncd's own connections, an operator's: not a node's
			}
			slices.Sort(ids)           // connection ids grow: the newest last
			said := p.kind + " " + key // its leaf links and client connections are said apart
			for _, id := range ids[g.max:] {
				if err := g.srv.nats().DisconnectClientByID(id); err == nil {
					g.closed.Add(1)
					g.since[said]++
				}
				delete(g.conns, id)
			}
			g.warn(said, name, p.kind, p.team, len(ids))
		}
	}
}

// node is the name of the registered node whose key is key.
func (g *LinkGuard) node(key string) (string, bool) {
	for _, n := range g.srv.Nodes() {
		if n.Nkey == key {
			return n.Name, true
		}
	}
	return "", false
}

// live is the ids of the connections of kind the server lists to team's
// account.
func (g *LinkGuard) live(kind, team string) (map[uint64]bool, error) {
	ns := g.srv.nats()
	if ns == nil {
		return nil, errors.New("no server")
	}
	live := map[uint64]bool{}
	if kind == "Client" {
		cz, err := ns.Connz(&server.ConnzOptions{Account: team, Limit: 1 << 20})
		if err != nil {
			return nil, err
		}
		for _, c := range cz.Conns {
			live[c.Cid] = true
		}
		return live, nil
	}
	lz, err := ns.Leafz(&server.LeafzOptions{Account: team})
	if err != nil {
		return nil, err
	}
	for _, l := range lz.Leafs {
		live[l.ID] = true
	}
	return live, nil
}

// warnEvery is how often one node's excess connections are logged.
const warnEvery = time.Minute

func (g *LinkGuard) warn(key, name, kind, team string, held int) {
	now := time.Now()
	if now.Sub(g.warned[key]) < warnEvery {
		return
	}
	what := "leaf links"
	if kind == "Client" {
		what = "client connections"
	}
	g.logger.Warn(fmt.Sprintf("node %s of team %s opened more %s than a workstation holds: its newest were closed, so that they cannot take its teammates' places; its key may be in other hands, or its software floods the hub (pisyncd hub remove-node %s ends it)", name, team, what, name),
		"node", name, "team", team, "held", held, "bound", g.max, "closed", g.since[key])
	g.warned[key], g.since[key] = now, 0
}
