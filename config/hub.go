package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// HubPrefix is the prefix of `pisyncd hub`'s variables.
const HubPrefix = "PISYNC_HUB"

// Hub configures `pisyncd hub`, a node of the hub cluster that
// workstations join as leaf nodes. Running it is the explicit request to
// listen on the network.
type Hub struct {
	Name             string   `envconfig:"NAME" desc:"server name, unique in the cluster (default: pisyncd-hub-<host name up to its first dot>)"`
	StateDir         string   `envconfig:"STATE_DIR" desc:"the hub's JetStream store (default: $XDG_STATE_HOME/pisyncd-hub, else ~/.local/state/pisyncd-hub)"`
	Listen           string   `envconfig:"LISTEN" default:"127.0.0.1:4222" empty:"keep" desc:"client listener (administration); empty: none"`
	LeafListen       string   `envconfig:"LEAF_LISTEN" default:"0.0.0.0:7422" desc:"leaf-node listener that workstations dial"`
	ClusterName      string   `envconfig:"CLUSTER_NAME" default:"pisyncd" desc:"cluster name"`
	ClusterListen    string   `envconfig:"CLUSTER_LISTEN" desc:"cluster route listener, e.g. 0.0.0.0:6222 (default: off, a single hub)"`
	Routes           []string `envconfig:"ROUTES" desc:"comma-separated routes to the other hub nodes, nats://host:6222"`
	RouteSecret      string   `envconfig:"ROUTE_SECRET" desc:"file holding the secret every node of the cluster shares; routes authenticate with it (required with CLUSTER_LISTEN, as is TLS with TLS_CA unless OPEN; 'pisyncd hub certs' writes route.secret)"`
	Replicas         int      `envconfig:"REPLICAS" default:"1" desc:"PI_HUB replicas: 1, or 3 on a three-node cluster"`
	MaxStore         ByteSize `envconfig:"MAX_STORE" default:"64GiB" desc:"JetStream file store limit"`
	MaxMemory        ByteSize `envconfig:"MAX_MEMORY" default:"64MiB" desc:"JetStream memory store limit"`
	TeamMaxStore     ByteSize `envconfig:"TEAM_MAX_STORE" desc:"each team's share of this node's store (default: MAX_STORE divided by the number of teams)"`
	TeamMaxMemory    ByteSize `envconfig:"TEAM_MAX_MEMORY" desc:"each team's share of this node's memory store (default: MAX_MEMORY divided by the number of teams)"`
	TeamMaxStreams   int      `envconfig:"TEAM_MAX_STREAMS" default:"2" desc:"streams a team may have (PI_HUB, PI_KEYS)"`
	TeamMaxConsumers int      `envconfig:"TEAM_MAX_CONSUMERS" desc:"consumers a team may have (default: its registered nodes + 8)"`
	TeamMaxLinks     int      `envconfig:"TEAM_MAX_LINKS" default:"256" desc:"leaf links a team may hold on this node (one a workstation), and as many client connections; a change applies to existing teams at the hub's restart"`
	NodesDir         string   `envconfig:"NODES_DIR" desc:"the registered workstations ('pisyncd hub add-node'); unless OPEN, every connection must authenticate as one of them (default: STATE_DIR/nodes)"`
	Open             bool     `envconfig:"OPEN" desc:"accept unauthenticated connections (development only; default: false)"`
	TLSCert          string   `envconfig:"TLS_CERT" desc:"hub certificate (PEM) for the client, leaf and cluster listeners"`
	TLSKey           string   `envconfig:"TLS_KEY" desc:"its private key (PEM)"`
	TLSCA            string   `envconfig:"TLS_CA" desc:"CA certificate verifying the other hub nodes' route connections"`
	StoreCipher      string   `envconfig:"STORE_CIPHER" default:"off" desc:"encrypt the hub's JetStream store at rest: chachapoly or aes, or off; the key is made at first use into STORE_KEY_FILE; an existing store is never converted (docs/SECURITY.md)"`
	StoreKeyFile     string   `envconfig:"STORE_KEY_FILE" desc:"the store's key, 0600 (default: STATE_DIR/store-key)"`
	HTTPAddr         string   `envconfig:"HTTP_ADDR" desc:"loopback address for the hub's /healthz and /metrics (Prometheus), e.g. 127.0.0.1:9467 (default: off); /metrics needs the token in STATE_DIR/metrics-token as a bearer token"`
	LogLevel         string   `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat        string   `envconfig:"LOG_FORMAT" default:"text" desc:"text or json"`
}

// LoadHub reads the hub's environment.
func LoadHub() (*Hub, error) {
	var h Hub
	if err := process(HubPrefix, &h); err != nil {
		return nil, err
	}
	if err := pathSettings(HubPrefix, os.UserHomeDir, map[string]*string{
		"STATE_DIR": &h.StateDir, "NODES_DIR": &h.NodesDir, "TLS_CERT": &h.TLSCert, "TLS_KEY": &h.TLSKey,
		"TLS_CA": &h.TLSCA, "ROUTE_SECRET": &h.RouteSecret, "STORE_KEY_FILE": &h.StoreKeyFile,
	}); err != nil {
		return nil, err
	}
	if h.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("config: %s_NAME: %w", HubPrefix, err)
		}
		h.Name = "pisyncd-hub-" + strings.Split(host, ".")[0]
	}
	if h.StateDir == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
			h.StateDir = filepath.Join(x, "pisyncd-hub")
		} else {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, fmt.Errorf("config: no home directory: set %s_STATE_DIR", HubPrefix)
			}
			h.StateDir = filepath.Join(home, ".local", "state", "pisyncd-hub")
		}
	}
	if h.NodesDir == "" {
		h.NodesDir = filepath.Join(h.StateDir, "nodes")
	}
	errs := []error{checkStateDir(HubPrefix+"_STATE_DIR", h.StateDir)}
	if (h.TLSCert == "") != (h.TLSKey == "") {
		errs = append(errs, fmt.Errorf("%s_TLS_CERT and %s_TLS_KEY go together", HubPrefix, HubPrefix))
	}
	if err := checkStoreCipher(HubPrefix, h.StoreCipher); err != nil {
		errs = append(errs, err)
	}
	if h.LeafListen == "" {
		errs = append(errs, fmt.Errorf("%s_LEAF_LISTEN is required", HubPrefix))
	}
	// One address for two listeners: the second was said to be taken by
	// "another program, or another pisyncd" (a probe).
	if h.HTTPAddr != "" {
		if err := CheckLoopback(h.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("%s_HTTP_ADDR: %w: its /metrics is for this machine's monitoring; a scraper elsewhere reaches it through a proxy of yours", HubPrefix, err))
		}
	}
	listeners := []struct{ name, addr string }{{"LISTEN", h.Listen}, {"LEAF_LISTEN", h.LeafListen}, {"CLUSTER_LISTEN", h.ClusterListen}, {"HTTP_ADDR", h.HTTPAddr}}
	for i, a := range listeners {
		for _, b := range listeners[i+1:] {
			if a.addr != "" && a.addr == b.addr {
				errs = append(errs, fmt.Errorf("%s_%s and %s_%s are both %s: each listener needs a port of its own", HubPrefix, a.name, HubPrefix, b.name, a.addr))
			}
		}
	}
	if h.TeamMaxStreams < 2 {
		errs = append(errs, fmt.Errorf("%s_TEAM_MAX_STREAMS %d: want at least 2 (a team's PI_HUB and PI_KEYS)", HubPrefix, h.TeamMaxStreams))
	}
	if h.TeamMaxConsumers < 0 {
		errs = append(errs, fmt.Errorf("%s_TEAM_MAX_CONSUMERS %d: want 0 (no limit, the default) or more", HubPrefix, h.TeamMaxConsumers))
	}
	if h.TeamMaxLinks < 1 {
		errs = append(errs, fmt.Errorf("%s_TEAM_MAX_LINKS %d: want at least 1 (one a workstation of the team; the default is 256)", HubPrefix, h.TeamMaxLinks))
	}
	// As on a workstation: a store that can hold nothing refused every
	// line, and 0 read as nats-server's 10 GiB, not the 64 GiB default.
	if h.MaxStore < 64<<20 {
		errs = append(errs, fmt.Errorf("%s_MAX_STORE %v: want at least 64MiB (the default is 64GiB)", HubPrefix, h.MaxStore))
	}
	if h.MaxMemory < 16<<20 {
		errs = append(errs, fmt.Errorf("%s_MAX_MEMORY %v: want at least 16MiB (the default is 64MiB)", HubPrefix, h.MaxMemory))
	}
	if h.TeamMaxStore != 0 && h.TeamMaxStore < 16<<20 || h.TeamMaxMemory != 0 && h.TeamMaxMemory < 1<<20 {
		errs = append(errs, fmt.Errorf("%s_TEAM_MAX_STORE %v, _MEMORY %v: want at least 16MiB and 1MiB a team, or unset (a share each of MAX_STORE and MAX_MEMORY)", HubPrefix, h.TeamMaxStore, h.TeamMaxMemory))
	}
	if h.Replicas != 1 && h.Replicas != 3 {
		errs = append(errs, fmt.Errorf("%s_REPLICAS %d: want 1 or 3", HubPrefix, h.Replicas))
	}
	if h.Replicas > 1 && h.ClusterListen == "" {
		errs = append(errs, fmt.Errorf("%s_REPLICAS %d needs a cluster (%s_CLUSTER_LISTEN, %s_ROUTES)", HubPrefix, h.Replicas, HubPrefix, HubPrefix))
	}
	errs = append(errs, checkLogging(HubPrefix, h.LogLevel, h.LogFormat)...)
	return &h, errors.Join(errs...)
}

// Logging returns a Config carrying only the hub's log settings, for its
// Logger method.
func (h *Hub) Logging() *Config { return &Config{LogLevel: h.LogLevel, LogFormat: h.LogFormat} }

// HubUsage writes the table of the hub's variables.
func HubUsage(w io.Writer) error {
	return usage(w, HubPrefix, &Hub{})
}
