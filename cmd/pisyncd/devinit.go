package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/keyring"
)

// devInitCommand prepares a development cluster's security in one folder,
// once: a CA, hub certificate and route secret (hub certs) and each node
// registered with its seed (hub add-node), keeping whatever a previous run
// made. The route secret stays readable by its owner only: the hubs read
// it, the workstations never need it. It is what
// docker-compose.yml runs before the hubs start, so a plain `docker-compose
// up` is secured; a container image has no shell to script the two steps.
func devInitCommand(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("dev-init", flag.ContinueOnError)
	hosts := fset.String("hosts", "", "comma-separated host names and IPs of the hub nodes")
	nodes := fset.String("nodes", "", "comma-separated workstation names to register")
	owner := fset.String("owner", "", "UID:GID to own what workstations read (ca.pem, their seeds, the team key)")
	teamKey := fset.String("team-key", "", "also create a team keyring for end-to-end encryption at this path (kept if there), for the workstations only: not in DIR, which the hubs read")
	const usage = "pisyncd hub dev-init DIR --hosts H1,H2 --nodes N1,N2 [--owner UID:GID] [--team-key FILE]"
	if err := parseArgs(fset, reorder(args, "hosts", "nodes", "owner", "team-key"), usage, 1); err != nil {
		return err
	}
	hs, ns := splitList(*hosts), splitList(*nodes)
	if len(hs) == 0 || len(ns) == 0 {
		return &usageError{Msg: "dev-init: --hosts and --nodes are required", Usage: usage}
	}
	if err := checkHosts(hs); err != nil {
		return err
	}
	for _, n := range ns {
		if !eventlog.ValidNodeID(n) {
			return fmt.Errorf("%w: node name %q: want 1 to 64 characters of [A-Za-z0-9_-]", errUsage, n)
		}
	}
	uid, gid := -1, -1
	if *owner != "" {
		u, g, ok := strings.Cut(*owner, ":")
		var err1, err2 error
		uid, err1 = strconv.Atoi(u)
		gid, err2 = strconv.Atoi(g)
		if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
			return fmt.Errorf("%w: --owner %q: want UID:GID", errUsage, *owner)
		}
	}
	dir := fset.Arg(0)
	certs := []string{embedded.DevCerts.CA, embedded.DevCerts.Cert, embedded.DevCerts.Key}
	switch {
	case allExist(dir, certs...):
		fmt.Fprintf(stdout, "kept the CA and hub certificate in %s\n", dir)
	case allExist(dir, embedded.DevCerts.CA, embedded.DevCerts.CAKey):
		// The CA stays: the workstations trust it.
		if _, err := embedded.RenewHubCert(dir, hs); err != nil {
			return fmt.Errorf("dev-init: %w", err)
		}
		fmt.Fprintf(stdout, "kept the CA in %s and issued a new hub certificate for %v from it\n", dir, hs)
	default:
		if err := embedded.GenerateDevCerts(dir, hs); err != nil {
			return fmt.Errorf("dev-init: %w", err)
		}
		fmt.Fprintf(stdout, "created a development CA and hub certificate for %v in %s\n", hs, dir)
	}
	if made, err := embedded.GenerateRouteSecret(filepath.Join(dir, embedded.RouteSecretFile)); err != nil {
		return fmt.Errorf("dev-init: %w", err)
	} else if made {
		fmt.Fprintf(stdout, "created the cluster's route secret %s\n", filepath.Join(dir, embedded.RouteSecretFile))
	} else {
		fmt.Fprintf(stdout, "kept the route secret in %s\n", dir)
	}
	readable := []string{filepath.Join(dir, embedded.DevCerts.CA)}
	nodesDir := filepath.Join(dir, "nodes")
	for _, n := range ns {
		seedFile := n + ".nkey"
		readable = append(readable, filepath.Join(dir, seedFile))
		if allExist(dir, seedFile) && allExist(nodesDir, n+".json") {
			fmt.Fprintf(stdout, "kept node %s\n", n)
			continue
		}
		// A registration whose seed is gone gets a new key: nobody has the
		// old one to run with.
		seed, _, err := embedded.ReplaceNode(nodesDir, n, embedded.DefaultTeam)
		if err != nil {
			return fmt.Errorf("dev-init: %w", err)
		}
		if err := fsutil.WriteFileAtomic(filepath.Join(dir, seedFile), append(seed, '\n')); err != nil {
			return fmt.Errorf("dev-init: seed of %s: %w", n, err)
		}
		fmt.Fprintf(stdout, "registered node %s: seed %s, registration %s\n", n, filepath.Join(dir, seedFile), filepath.Join(nodesDir, n+".json"))
	}
	if *teamKey != "" {
		if _, err := os.Stat(*teamKey); err == nil {
			fmt.Fprintf(stdout, "kept the team key %s\n", *teamKey)
		} else {
			r := keyring.New(time.Now())
			if err := keyring.Save(*teamKey, r); err != nil {
				return fmt.Errorf("dev-init: %w", err)
			}
			fmt.Fprintf(stdout, "created team key %s (team %s, key %s)\n", *teamKey, r.Team, r.Current)
		}
		readable = append(readable, *teamKey)
	}
	if uid >= 0 {
		for _, p := range readable {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("dev-init: %w", err)
			}
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// checkHosts refuses a name a certificate cannot usefully hold: what is
// neither an IP nor a DNS name (a space, say: "bad host" went into the
// certificate as it was, and no workstation could reach the hub by it).
// A wildcard may lead a name (*.example.com).
func checkHosts(hosts []string) error {
	for _, h := range hosts {
		if net.ParseIP(h) != nil {
			continue
		}
		name := strings.TrimPrefix(h, "*.")
		ok := len(name) > 0 && len(name) <= 253
		for _, label := range strings.Split(name, ".") {
			ok = ok && len(label) > 0 && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-' &&
				strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == ""
		}
		if !ok {
			return fmt.Errorf("%w: --hosts %q: want host names (letters, digits, - and ., a leading *. for a wildcard) or IP addresses, comma-separated", errUsage, h)
		}
	}
	return nil
}

func allExist(dir string, names ...string) bool {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}
