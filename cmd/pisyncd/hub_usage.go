package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/cli"
)

// hubUsageResult is one team's use of the hub: its share of the store and
// what each of its nodes holds on PI_HUB. The share is the team's, so one
// node can fill it for all: this names the node.
type hubUsageResult struct {
	Team       string                        `json:"team"`
	StoreUsed  int64                         `json:"storeUsedBytes"`
	StoreLimit int64                         `json:"storeLimitBytes"` // -1: none
	Nodes      map[string]eventlog.NodeUsage `json:"nodes"`
	Error      string                        `json:"error,omitempty"`
}

// readHubUsage reads the usage of the account nc is connected to.
func readHubUsage(ctx context.Context, nc *nats.Conn) (hubUsageResult, error) {
	var res hubUsageResult
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	if res.StoreUsed, res.StoreLimit, err = teamStore(ctx, js); err != nil {
		return res, err
	}
	res.Nodes, err = eventlog.HubUsage(ctx, js)
	return res, err
}

// teamStore is the store js's account uses and its share of the hub's
// (-1: none).
func teamStore(ctx context.Context, js jetstream.JetStream) (used, limit int64, err error) {
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("hub usage: %w", err)
	}
	return int64(ai.Store), ai.Limits.MaxStore, nil
}

// serveHubUsage answers `pisyncd hub usage` on the control socket: every
// team's usage, or the one the query names.
func serveHubUsage(h *embedded.Server) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		team := r.URL.Query().Get("team")
		var out []hubUsageResult
		for _, t := range namedTeams(h, team) {
			var res hubUsageResult
			err := withTeam(h, t, func(nc *nats.Conn) (err error) {
				res, err = readHubUsage(r.Context(), nc)
				return err
			})
			res.Team = t
			if err != nil {
				res.Error = teamUsageError(err)
			}
			out = append(out, res)
		}
		if len(out) == 0 {
			http.Error(w, noTeam(h, "usage", team), http.StatusNotFound)
			return
		}
		writeJSON(w, out)
	}
}

// teamUsageError is a team's usage that could not be read, with what a
// silence means: a bare "context deadline exceeded" was all it said when a
// node of three had just been killed (a cluster probe, 2026-12-07).
func teamUsageError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) {
		return err.Error() + ": the hub's JetStream did not answer; " + clusterSilence + ": try again"
	}
	return err.Error()
}

const hubUsageUsage = "pisyncd hub usage [--team T] [--json] [--server URL (--user U --password-file F | --creds FILE) [--ca FILE]]"

// usageWithin bounds hub usage's wait for the hub node's answer.
const usageWithin = time.Minute

// hubUsageCommand prints, for each team, its share of the hub's store and
// what each node holds, largest first: asked of the hub node running here,
// or of any hub through its client listener as an administration user.
func hubUsageCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("hub usage", flag.ContinueOnError)
	team := fs.String("team", "", "only this team's account (default: every team)")
	asJSON := fs.Bool("json", false, "print JSON")
	admin := addAdminFlags(fs, "read")
	if err := parseArgs(fs, reorder(args, append([]string{"team"}, adminValued...)...), hubUsageUsage, 0); err != nil {
		return err
	}
	if err := admin.check(hubUsageUsage); err != nil {
		return err
	}
	ctx, stop := signalContext(io.Discard)
	defer stop()
	var out []hubUsageResult
	if *admin.server != "" {
		nc, err := admin.connect("pisyncd hub usage")
		if err != nil {
			return fmt.Errorf("hub usage: %w", err)
		}
		defer nc.Close()
		res, err := readHubUsage(ctx, nc)
		if err != nil {
			return err
		}
		res.Team = *team
		out = append(out, res)
	} else {
		cfg, err := config.LoadHub()
		if err != nil {
			return err
		}
		path := "/usage"
		if *team != "" {
			path += "?" + url.Values{"team": {*team}}.Encode()
		}
		// Bounded: a cluster without quorum answers nothing, and the
		// command waited until it was interrupted.
		uctx, cancel := context.WithTimeout(ctx, usageWithin)
		defer cancel()
		if err := callHub(uctx, cfg, http.MethodGet, path, &out); err != nil {
			return err
		}
	}
	var errs []error
	for _, r := range out {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("hub usage: team %s: %s", cmp.Or(r.Team, "(the account)"), r.Error))
		}
	}
	if *asJSON {
		return errors.Join(writeJSONTo(stdout, out), errors.Join(errs...))
	}
	for _, r := range out {
		name := cmp.Or(r.Team, "(the account)")
		if r.Error != "" {
			fmt.Fprintf(stdout, "team %s: %s\n", name, r.Error)
			continue
		}
		share := "(no limit)"
		if r.StoreLimit > 0 {
			share = fmt.Sprintf("of %s (%d%%)", byteCount(r.StoreLimit), r.StoreUsed*100/r.StoreLimit)
		}
		fmt.Fprintf(stdout, "team %s: store %s %s\n", name, byteCount(r.StoreUsed), share)
		nodes := make([]string, 0, len(r.Nodes))
		for n := range r.Nodes {
			nodes = append(nodes, n)
		}
		slices.SortFunc(nodes, func(a, b string) int {
			return cmp.Or(cmp.Compare(r.Nodes[b].Bytes, r.Nodes[a].Bytes), cmp.Compare(a, b))
		})
		w := columnWidth(nodes, 20)
		for _, n := range nodes {
			u := r.Nodes[n]
			fmt.Fprintf(stdout, "  %-*s %10s in %s, %s\n", w, n, byteCount(u.Bytes), cli.Plural(int(u.Messages), "message", "messages"), cli.Plural(u.Sessions, "session", "sessions"))
		}
	}
	return errors.Join(errs...)
}
