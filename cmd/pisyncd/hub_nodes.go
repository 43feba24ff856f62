package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// `pisyncd hub nodes` and `pisyncd hub remove-node`: the workstations a hub
// node admits, and taking one away (a machine lost or retired, a seed
// leaked, a teammate who filled the team's share: docs/HUB.md). Removing is
// three steps that must come in order, the registration, the reload that
// closes the node's connections, then the erase of its lines (erased
// before the reload, it could publish them again), so one command does
// them.

const removeNodeUsage = "pisyncd hub remove-node NAME [--erase] [--json]"

// removedNode is what `hub remove-node` did.
type removedNode struct {
	Node     string `json:"node"`
	Team     string `json:"team"`
	NodesDir string `json:"nodesDir"`
	// Reloaded: the hub node running here read its nodes again, which
	// closed the node's connections; false when none runs here.
	Reloaded bool             `json:"reloaded"`
	Erased   []hubEraseResult `json:"erased,omitempty"`
}

func removeNodeCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hub remove-node", flag.ContinueOnError)
	erase := fs.Bool("erase", false, "then erase every line the node published from PI_HUB, as pisyncd hub erase --node does")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseArgs(fs, reorder(args), removeNodeUsage, 1); err != nil {
		return err
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	if *erase {
		// Refused before anything is removed: the erase needs the hub
		// node running here. Before, the node was removed and then the
		// command failed, with no JSON for a script to read.
		if !hubRunsHere(cfg) {
			return fmt.Errorf("remove-node --erase needs the hub node running here, and none answers on its control socket (PISYNC_HUB_STATE_DIR %s): nothing was removed. Start it and run this again, or remove the node now (without --erase) and erase its lines later through any hub (pisyncd hub erase --node %s --server URL ...)", cfg.StateDir, fs.Arg(0))
		}
	}
	n, err := embedded.RemoveNode(cfg.NodesDir, fs.Arg(0))
	if err != nil {
		if *erase {
			// A node removed before without --erase: its lines are
			// still on the hub, and another command erases them.
			return fmt.Errorf("%w; to erase the lines of a node removed before, run pisyncd hub erase --node %s", err, fs.Arg(0))
		}
		return err
	}
	out := removedNode{Node: n.Name, Team: n.Team, NodesDir: cfg.NodesDir}
	// Text as it happens: an erase may take minutes.
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format, a...)
		}
	}
	say("removed node %s (team %s) from %s\n", n.Name, n.Team, cfg.NodesDir)
	running, err := reloadHere(ctx, cfg)
	out.Reloaded = running != nil
	if err != nil {
		return fmt.Errorf("node %s removed from %s, but the hub node running here did not reload, so its connections stay open: %w; mend that and run pisyncd hub reload", n.Name, cfg.NodesDir, err)
	}
	if out.Reloaded {
		say("the hub node running here reloaded: %s's key is refused and its connections are closed\n", n.Name)
	} else {
		say("no hub node runs here (PISYNC_HUB_STATE_DIR %s): a pisyncd hub reads the removal when it starts, or on pisyncd hub reload; a stock nats-server needs pisyncd hub config again and a restart (its reload leaves a removed workstation linked)\n", cfg.StateDir)
	}
	if *erase {
		if !out.Reloaded {
			return fmt.Errorf("node %s removed from %s; --erase needs the hub node running here, and none answers on its control socket: start it and run pisyncd hub erase --node %s, or erase through any hub with its --server", n.Name, cfg.NodesDir, n.Name)
		}
		q := url.Values{"node": {n.Name}, "team": {n.Team}}
		if out.Erased, err = hubEraseStream(ctx, cfg, q, func(p erasedSoFar) {
			if !*asJSON {
				printErasedSoFar(stdout, n.Name, p)
			}
		}); err != nil {
			return fmt.Errorf("node %s removed and its connections closed, but its lines were not erased: %w (pisyncd hub erase --node %s tries again)", n.Name, err, n.Name)
		}
		for _, r := range out.Erased {
			if r.Error != "" {
				return fmt.Errorf("node %s removed and its connections closed, but erasing its lines in team %s failed: %s (pisyncd hub erase --node %s tries again)", n.Name, r.Team, r.Error, n.Name)
			}
			say("team %s: erased %d message(s) of node %s from PI_HUB\n", r.Team, r.Messages, n.Name)
		}
		// The machine keeps them as forwarded: added back as it is, it
		// sends only lines written from then on, and a machine that
		// joins later lacks the rest of its sessions (a probe).
		say("erased for good: were %s added back with the state it has, it would send only the lines it writes from then on (docs/HUB.md, remove-node)\n", n.Name)
	}
	if cfg.ClusterListen != "" || len(cfg.Routes) > 0 {
		say("the cluster's other hub nodes still admit %s: on each, `pisyncd hub remove-node %s` (a nodes folder of its own) or `pisyncd hub reload` (this folder shared)\n", n.Name, n.Name)
	}
	if *asJSON {
		return writeJSONTo(stdout, out)
	}
	return nil
}

// hubRunsHere reports whether a hub node answers on the control socket of
// the state dir cfg names.
func hubRunsHere(cfg *config.Hub) bool {
	c, err := net.DialTimeout("unix", filepath.Join(cfg.StateDir, config.ControlSocket), 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// reloadAnswer is the hub's answer to a reload: what it admits, and the
// settings it runs with that a workstation needs (add-node tells them from
// these, not from its own shell's).
type reloadAnswer struct {
	Teams      []string `json:"teams"`
	Nodes      []string `json:"nodes"`
	TLSCert    string   `json:"tlsCert,omitempty"`
	LeafListen string   `json:"leafListen,omitempty"`
}

// reloadHere has the hub node running here read its registered nodes
// again, and returns its answer; none running is not an error (nil): it
// reads them when it starts.
func reloadHere(ctx context.Context, cfg *config.Hub) (*reloadAnswer, error) {
	var a reloadAnswer
	switch err := postHub(ctx, cfg, "/reload", &a); {
	case errors.Is(err, errNoHubHere):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &a, nil
}

// reloadCommand has the hub node running here read its registered nodes
// again, as SIGHUP does, and says whether it did: a node of a cluster
// sharing its nodes folder with the one a node was removed on, say.
func reloadCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hub reload", flag.ContinueOnError)
	if err := parseArgs(fs, args, "pisyncd hub reload", 0); err != nil {
		return err
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	var res reloadAnswer
	if err := postHub(ctx, cfg, "/reload", &res); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "the hub node running here reloaded: it admits %d node(s) %v, teams %v\n", len(res.Nodes), res.Nodes, res.Teams)
	return err
}

// nodesCommand lists the registered workstations.
func nodesCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hub nodes", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseArgs(fs, args, "pisyncd hub nodes [--json]", 0); err != nil {
		return err
	}
	cfg, err := config.LoadHub()
	if err != nil {
		return err
	}
	nodes, err := embedded.LoadNodes(cfg.NodesDir)
	if err != nil {
		return err
	}
	if *asJSON {
		if nodes == nil {
			nodes = []embedded.Node{}
		}
		return writeJSONTo(stdout, nodes)
	}
	if len(nodes) == 0 {
		_, err := fmt.Fprintf(stdout, "no workstation is registered in %s (pisyncd hub add-node NAME registers one)\n", cfg.NodesDir)
		return err
	}
	names, teams := make([]string, len(nodes)), make([]string, len(nodes))
	for i, n := range nodes {
		names[i], teams[i] = n.Name, n.Team
	}
	nw, tw := columnWidth(names, 24), columnWidth(teams, 16)
	for _, n := range nodes {
		fmt.Fprintf(stdout, "%-*s team %-*s %s\n", nw, n.Name, tw, n.Team, n.Nkey)
	}
	return nil
}

// columnWidth is the width of a column of names: at least least, and the
// longest (a node id may be 64 characters, a generated one is 36: a fixed
// width pushed the columns after such a name out of line).
func columnWidth(names []string, least int) int {
	for _, n := range names {
		least = max(least, len(n))
	}
	return least
}
