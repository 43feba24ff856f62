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
// links, and as many client connections. nats-server bounds a team's links only as a whole
// (PISYNC_HUB_TEAM_MAX_LINKS): one node, its key stolen or its software
// gone wrong, could hold every link of its team, so that a teammate whose
// link dropped (a laptop asleep, a restart) could not link again for as
// long as it went on. The guard follows the links made to every team
// (the system account's connect events) and closes a node's newest links
// past the bound as soon as they are made, so they hold a slot for a
// moment, not for good; the log names the node. A stock nats-server
// running the same configuration has no guard.
type LinkGuard struct {
	srv    *Server
	logger *slog.Logger
	max    int
	closed atomic.Int64

	// Owned by Run: each node key's links (their connection ids), and
	// when each node's excess was last logged.
	links  map[string]map[uint64]bool
	warned map[string]time.Time
	since  map[string]int // links closed since the last warning, by node key
}

// NewLinkGuard returns the guard of srv's links, bound to max links a
// node (NodeMaxLinks when max is 0).
func NewLinkGuard(srv *Server, max int, logger *slog.Logger) *LinkGuard {
	if max <= 0 {
		max = NodeMaxLinks
	}
	return &LinkGuard{srv: srv, logger: logger, max: max,
		links: map[string]map[uint64]bool{}, warned: map[string]time.Time{}, since: map[string]int{}}
}

// Closed is how many links the guard has closed.
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
	// A buffer for a flood's events; one that overflows loses events,
	// which the next count against the server's own list makes good.
	ch := make(chan *nats.Msg, 8192)
	for _, subj := range []string{"$SYS.ACCOUNT.*.CONNECT", "$SYS.ACCOUNT.*.DISCONNECT"} {
		if _, err := nc.ChanSubscribe(subj, ch); err != nil {
			return fmt.Errorf("link guard: %s: %w", subj, err)
		}
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("link guard: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			g.handle(m.Data)
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

func (g *LinkGuard) handle(data []byte) {
	var ev linkEvent
	if err := json.Unmarshal(data, &ev); err != nil || !guarded[ev.Client.Kind] || ev.Client.User == "" {
		return
	}
	if ns := g.srv.nats(); ns == nil || ev.Server.ID != ns.ID() {
		// Another hub node's (the system account spans the cluster):
		// its connection ids are its own, and its guard bounds them.
		return
	}
	// A node's leaf links and its client connections are bounded apart.
	key, id := ev.Client.Kind+" "+ev.Client.User, ev.Client.ID
	switch ev.Type {
	case server.DisconnectEventMsgType:
		delete(g.links[key], id)
		if len(g.links[key]) == 0 {
			delete(g.links, key)
		}
		return
	case server.ConnectEventMsgType:
	default:
		return
	}
	if g.links[key] == nil {
		g.links[key] = map[uint64]bool{}
	}
	g.links[key][id] = true
	if len(g.links[key]) <= g.max {
		return
	}
	name, ok := g.node(ev.Client.User)
	if !ok {
		return // pisyncd's own connections, an operator's: not a node's
	}
	// Past the bound: count again against the links the server holds
	// (a disconnect event may have been lost), and close the newest.
	live, err := g.live(ev.Client.Kind, ev.Client.Account)
	if err != nil {
		g.logger.Warn("link guard: the team's links", "team", ev.Client.Account, "err", err)
		return
	}
	ids := make([]uint64, 0, len(g.links[key]))
	for id := range g.links[key] {
		if !live[id] {
			delete(g.links[key], id)
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) <= g.max {
		return
	}
	slices.Sort(ids) // connection ids grow: the newest last
	for _, id := range ids[g.max:] {
		if err := g.srv.nats().DisconnectClientByID(id); err == nil {
			g.closed.Add(1)
			g.since[key]++
		}
		delete(g.links[key], id)
	}
	g.warn(key, name, ev.Client.Kind, ev.Client.Account, len(ids))
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

// live is the ids of the connections of kind the server holds to team's
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

// warnEvery is how often one node's excess links are logged.
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
