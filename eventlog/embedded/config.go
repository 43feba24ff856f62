package embedded

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/eventlog"
)

// Defaults for the JetStream limits. A zero limit in server.Options means
// "75% of RAM / free disk" (nats-server issue #6756), so zero in Config is
// replaced by these and never reaches the server.
const (
	DefaultMaxMemory int64 = 64 << 20 // only memory-backed streams count; ours are file-backed
	DefaultMaxStore  int64 = 10 << 30
)

// Config describes one embedded server.
type Config struct {
	// StateDir is the daemon's state dir. The JetStream store lives in
	// StateDir/jetstream; the lock and the listener credentials beside it.
	StateDir string

	// Holder names a command that opens the store while no daemon runs
	// ("pisyncd events"), for the message another process gets while it
	// holds the state dir (InUseError). "" for the daemon.
	Holder string

	// NodeID names this machine: server name "pisyncd-<node>", JetStream
	// domain "pi-<node>". Letters, digits, '-' and '_' only, because it
	// becomes a subject token.
	NodeID string

	// MaxMemory and MaxStore are the JetStream limits in bytes; zero means
	// DefaultMaxMemory / DefaultMaxStore.
	MaxMemory int64
	MaxStore  int64

	// Listen is an optional loopback "host:port" for local tools (port 0
	// picks a free port). Empty means no listener at all. Non-loopback hosts
	// are refused.
	Listen string

	// Logger receives the server's log. Nil discards it.
	Logger *slog.Logger

	// Trace logs every protocol message at debug level. Very noisy.
	Trace bool

	// HubURLs make this server a leaf node of the hub cluster
	// (ARCHITECTURE.md decision 2): it dials out, so no listener is needed
	// here. HubCredsFile is the node's .creds file for the hub, if any.
	HubURLs      []string
	HubCredsFile string
	// HubNkeySeed is this node's nkey seed registered with the hub
	// (`pisyncd hub add-node`); HubCAFile verifies the hub's certificate
	// (tls:// URLs; the system roots when empty).
	HubNkeySeed []byte
	HubCAFile   string
	// HubInsecure allows credentials (HubNkeySeed, HubCredsFile, or a
	// user in a hub URL) over a plain nats:// connection to a host other
	// than loopback. Without it Start refuses; with it Start logs a
	// warning (PISYNC_HUB_INSECURE).
	HubInsecure bool
	// HubCompression is the leaf link's compression: "auto" (or ""),
	// "off", "fast", "better" or "best" (compressionModes; with HubURLs,
	// Start refuses another).
	HubCompression string
	// StoreCipher encrypts the JetStream store at rest with nats-server's
	// cipher: StoreCipherChaChaPoly or StoreCipherAES; "" keeps it in clear.
	// The key is StoreKeyFile's, else StateDir/store-key, made at first
	// use (storeKey says what Start refuses).
	StoreCipher  string
	StoreKeyFile string
	// LeafReconnect is the wait between leaf connection attempts (0: the
	// server's default of one second).
	LeafReconnect time.Duration
}

// withDefaults validates cfg and returns a copy with defaults applied.
func (cfg Config) withDefaults() (_ Config, err error) {
	if cfg.StateDir == "" {
		return cfg, errors.New("config: StateDir is empty")
	}
	if !eventlog.ValidNodeID(cfg.NodeID) {
		return cfg, fmt.Errorf("config: NodeID %q must be 1 to 64 letters, digits, '-' and '_'", cfg.NodeID)
	}
	if cfg.MaxMemory < 0 || cfg.MaxStore < 0 {
		return cfg, fmt.Errorf("config: negative JetStream limit (memory %d, store %d)", cfg.MaxMemory, cfg.MaxStore)
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = DefaultMaxStore
	}
	if cfg.HubCredsFile != "" && len(cfg.HubURLs) == 0 {
		return cfg, errors.New("config: hub credentials without hub URLs")
	}
	for _, u := range cfg.HubURLs {
		if _, err := parseHubURL(u); err != nil {
			return cfg, fmt.Errorf("config: hub URL: %w", err)
		}
	}
	if plain := plainCredentialURLs(cfg); len(plain) > 0 && !cfg.HubInsecure {
		return cfg, fmt.Errorf("config: hub URL %s is plain text and would carry this node's credentials: use tls:// with the hub's CA, or set HubInsecure on a network you trust", plain[0])
	}
	if cfg.StoreCipher, err = ParseStoreCipher(cfg.StoreCipher); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// ServerName is the nats server name for a node.
func ServerName(nodeID string) string { return "pisyncd-" + nodeID }

// serverName is the server name of a node that authenticates to the hub
// with a key (cfg's seed or .creds file): ServerName with the key's first
// characters after it. The hub closes a leaf connection when another one
// of the same server name comes in: named after the node alone, a teammate
// running with another node's id and a key of its own knocked that node off
// the hub every few seconds, for as long as it liked. With the key in the
// name, only a second machine with the same key does that, and the hub's
// operator sees which key a connection is.
func serverName(cfg Config) string {
	seed := cfg.HubNkeySeed
	if len(seed) == 0 && cfg.HubCredsFile != "" {
		if b, err := os.ReadFile(cfg.HubCredsFile); err == nil {
			if kp, err := nkeys.ParseDecoratedNKey(b); err == nil {
				seed, _ = kp.Seed()
			}
		}
	}
	if len(seed) == 0 {
		return ServerName(cfg.NodeID)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return ServerName(cfg.NodeID) // the leaf configuration says why
	}
	pub, err := kp.PublicKey()
	if err != nil || len(pub) < 9 {
		return ServerName(cfg.NodeID)
	}
	return ServerName(cfg.NodeID) + "-" + strings.ToLower(pub[1:9])
}

// Domain is the JetStream domain of a node's embedded server.
func Domain(nodeID string) string { return "pi-" + nodeID }
