// Package config holds pisyncd's settings: every one a PISYNC_* environment
// variable read through envconfig, with defaults that work on a fresh
// machine. Nothing else in pisyncd reads the environment.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/kelseyhightower/envconfig"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/redact"
	"github.com/pisyncd/pisyncd/session"
	"io/fs"
	"syscall"
)

// Prefix of every variable.
const Prefix = "PISYNC"

// Config is the daemon's configuration. Field tags are the documentation
// `pisyncd --help` prints.
type Config struct {
	SessionsDir string `envconfig:"SESSIONS_DIR" desc:"pi's sessions folder to watch and write (default: $PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions)"`
	StateDir    string `envconfig:"STATE_DIR" desc:"pisyncd's own state: embedded JetStream store, node id, lock, control socket (default: $XDG_STATE_HOME/pisyncd, else ~/.local/state/pisyncd; ~/Library/Application Support/pisyncd on macOS)"`
	NodeID      string `envconfig:"NODE_ID" desc:"this node's id, [A-Za-z0-9_-]{1,64} (default: generated once); kept in STATE_DIR/node-id, and another is refused over the same state dir"`

	LogLevel  string `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat string `envconfig:"LOG_FORMAT" default:"text" desc:"text or json"`

	HTTPAddr string   `envconfig:"HTTP_ADDR" desc:"loopback address for the web view (/), /metrics and /healthz, e.g. 127.0.0.1:9466 (default: off); the view and /metrics need the token in STATE_DIR/web-token (pisyncd web prints the link)"`
	WebHosts []string `envconfig:"WEB_HOSTS" desc:"comma-separated host names or IP addresses the web view answers to besides loopback names and addresses, without scheme, path, port or wildcard (the Host header's port is not compared; any other Host is refused: DNS rebinding)"`
	Listen   string   `envconfig:"LISTEN" desc:"loopback address of an optional NATS listener for local subscribers, e.g. 127.0.0.1:4223 (the examples leave 4222, NATS's usual port, to a hub node on the same machine, whose client listener takes it by default; a port that is taken is named at start); credentials are generated into STATE_DIR (default: off)"`

	HubURLs        []string      `envconfig:"HUB_URLS" desc:"comma-separated leaf URLs of the hub cluster (nats://host:7422, tls://…); set to replicate sessions across machines (default: off, one machine)"`
	HubCreds       string        `envconfig:"HUB_CREDS" desc:"this node's JWT credentials file for an operator-mode hub (.creds)"`
	HubNkey        string        `envconfig:"HUB_NKEY" desc:"file holding this node's nkey seed from 'pisyncd hub add-node' (0600)"`
	HubCA          string        `envconfig:"HUB_CA" desc:"CA certificate that signed the hub's TLS certificate (tls:// hub URLs; default: the system roots)"`
	HubInsecure    bool          `envconfig:"HUB_INSECURE" desc:"allow this node's hub credentials over a plain nats:// URL to a host other than loopback (refused by default: anyone on the path could read them; logged loudly when allowed)"`
	HubCompression string        `envconfig:"HUB_COMPRESSION" default:"auto" desc:"compression of the link to the hub: auto (nats-server's s2_auto: none on a link of under 10 ms, more the slower it is), off, fast, better or best; sealed lines do not compress, so a team that encrypts saves the work with off"`
	PathMap        string        `envconfig:"PATH_MAP" desc:"comma-separated FROM=TO absolute path prefixes applied to remote sessions' cwd and parentSession, e.g. /Users/ann=/home/ann"`
	Delete         string        `envconfig:"DELETE" default:"trash" desc:"what a session deleted on another machine does here: trash (move to SESSIONS_DIR/.pisyncd-trash) or ignore"`
	IdleAfter      time.Duration `envconfig:"IDLE_AFTER" default:"1s" desc:"remote lines are appended to a file only after a local pi has not written it for this long (100ms to 1h)"`

	Rules string `envconfig:"RULES" default:"auto" desc:"the context rules every session's context and views follow: auto (pi-1.6 for a session holding a line only pi >= 0.86 writes, seed otherwise), seed (pi 0.85.1 plus retainedTail, the project's contract) or pi-1.6 (docs/RULES.md)"`

	Search string `envconfig:"SEARCH" default:"auto" desc:"keep a full-text index of every session in STATE_DIR/search for pisyncd search and the web view's search: auto (the default: on, except with PISYNC_STORE_CIPHER: the index is plaintext and would sit in clear beside the encrypted store), on, or off; about 1.5-1.7× the sessions' size on disk, built from the streams at first start (docs/SEARCH.md, docs/SECURITY.md)"`

	KeyFile string `envconfig:"KEY_FILE" desc:"the team keyring for end-to-end encryption, 0600 (default: STATE_DIR/team-key.json; pisyncd key init|import writes it)"`
	Encrypt string `envconfig:"ENCRYPT" default:"auto" desc:"seal every line before it goes to the hub: on (fail closed: without a team key nothing is forwarded, and lines in clear from the hub are refused), off, or auto (on while a team key is here; without one, in clear until the hub shows the team encrypts, then nothing is forwarded until the key is imported); sealed lines from others are opened whenever a key is here, and without one wait for it, except under off, which refuses them (docs/SECURITY.md)"`

	StoreCipher  string `envconfig:"STORE_CIPHER" default:"off" desc:"encrypt the local JetStream store at rest: chachapoly or aes (nats-server's cipher), or off; the key is made at first use into PISYNC_STORE_KEY_FILE; an existing store is never converted, either way (docs/SECURITY.md, \"The local store at rest\")"`
	StoreKeyFile string `envconfig:"STORE_KEY_FILE" desc:"the store's key, 0600 (default: STATE_DIR/store-key); without it an encrypted store cannot be read: back it up apart from the store"`

	TrustedNodes []string `envconfig:"TRUSTED_NODES" default:"*" desc:"comma-separated nodes whose lines are written into any session here (your own machines); other nodes' lines are written only into sessions they began, and kept in the event log otherwise, and they may not delete, restore or erase a session this node or a trusted one wrote; * trusts every node of the team"`

	RemoteSessionsPerHour int      `envconfig:"REMOTE_SESSIONS_PER_HOUR" default:"2000" desc:"new sessions one other node may start here per hour (hub time), ten hours' worth at once; past it that node's new sessions are rejected (0: no limit)"`
	RemoteBytesPerHour    ByteSize `envconfig:"REMOTE_BYTES_PER_HOUR" default:"2GiB" desc:"bytes of lines one other node may send here per hour (hub time), ten hours' worth at once; past it its lines are rejected (0: no limit)"`

	RescanInterval  time.Duration `envconfig:"RESCAN_INTERVAL" default:"10s" desc:"how often the whole sessions tree is rescanned (the correctness path; file events are only a hint)"`
	MaxLine         ByteSize      `envconfig:"MAX_LINE" default:"64MiB" desc:"longest line published; longer lines are counted as malformed and skipped (at most a quarter of PISYNC_MEMORY_BUDGET less its 256MiB reserve)"`
	MaxStore        ByteSize      `envconfig:"MAX_STORE" default:"16GiB" desc:"JetStream file store limit"`
	MaxMemory       ByteSize      `envconfig:"MAX_MEMORY" default:"256MiB" desc:"JetStream memory store limit"`
	MemoryBudget    ByteSize      `envconfig:"MEMORY_BUDGET" default:"512MiB" desc:"the bound on the daemon's peak resident memory: 256MiB of it is a reserve (runtime, binary, the embedded server's block buffers, the collector's room), and of the rest a quarter is for lines the tailer holds (read, not yet stored), a quarter for bodies kept for repeated context queries, an eighth read ahead by one, an eighth for the search index's batch (the pages of its mapped files it leaves are in the reserve), the rest for the server's copies; the Go memory limit is this less 160MiB (GOMEMLIMIT wins); want at least 256MiB + 4 × PISYNC_MAX_LINE"`
	Workers         int           `envconfig:"WORKERS" default:"8" desc:"files read and published in parallel"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"10s" desc:"bound on a graceful stop; a second signal exits at once"`
}

// SearchOn reports whether the daemon keeps the search index
// (PISYNC_SEARCH): on, or auto without a store cipher. "" (a Config
// literal) is off.
func (c *Config) SearchOn() bool {
	switch c.Search {
	case "on":
		return true
	case "auto":
		// Read as the store reads it (embedded.ParseStoreCipher): "Off" is off.
		cipher := strings.ToLower(strings.TrimSpace(c.StoreCipher))
		return cipher == "" || cipher == "off"
	}
	return false
}

// Trusted returns the nodes whose lines are written into any session, nil
// for every node (PISYNC_TRUSTED_NODES=*).
func (c *Config) Trusted() []string {
	if len(c.TrustedNodes) == 0 || slices.Contains(c.TrustedNodes, "*") {
		return nil
	}
	return c.TrustedNodes
}

// Load reads the environment and fills in defaults. It does not create
// anything on disk; see EnsureNodeID.
func Load() (*Config, error) {
	var c Config
	if err := process(Prefix, &c); err != nil {
		return nil, err
	}
	c.lowerNames()
	if c.IdleAfter == 0 {
		// Set so: the replicator would append while pi writes the file
		// (it took 1s unsaid).
		return nil, fmt.Errorf("%s_IDLE_AFTER 0: remote lines wait until the local pi has not written the file for this long; want a positive duration, e.g. 1s (the default)", Prefix)
	}
	if err := c.fillDefaults(os.Getenv, os.UserHomeDir); err != nil {
		return nil, err
	}
	return &c, c.Validate()
}

// lowerNames reads the settings that take one of a few names in any case,
// as PISYNC_LOG_LEVEL, PISYNC_LOG_FORMAT and PISYNC_STORE_CIPHER always
// were (DEBUG, JSON and AES were taken, SEARCH=OFF, RULES=SEED and
// DELETE=Trash refused). A known name is kept in lower case, the form the
// daemon compares; any other value stays as written, for Validate to quote.
func (c *Config) lowerNames() {
	for _, s := range []struct {
		v     *string
		names []string
	}{
		{&c.Rules, []string{"auto", "seed", "pi-1.6"}},
		{&c.Search, []string{"auto", "on", "off"}},
		{&c.Encrypt, []string{"auto", "on", "off"}},
		{&c.HubCompression, []string{"auto", "off", "fast", "better", "best"}},
		{&c.Delete, []string{"trash", "ignore"}},
	} {
		if l := strings.ToLower(*s.v); slices.Contains(s.names, l) {
			*s.v = l
		}
	}
}

// minIdleAfter is the least PISYNC_IDLE_AFTER: the replicator ends a
// local partial line left unchanged for 60 times it (replicate's
// crashAfter), which at 1 ms cut into lines pi was still writing.
const minIdleAfter = 100 * time.Millisecond

// maxIdleAfter is the most PISYNC_IDLE_AFTER: past it a session pi wrote
// in the last hour would get no line from another machine, unsaid, and 60
// times a value past about 42,700 h overflowed, so a partial line pi was
// still writing was taken for a crash's at once and ended (a probe).
const maxIdleAfter = time.Hour

func (c *Config) fillDefaults(getenv func(string) string, home func() (string, error)) error {
	if err := pathSettings(Prefix, home, map[string]*string{
		"SESSIONS_DIR": &c.SessionsDir, "STATE_DIR": &c.StateDir, "HUB_NKEY": &c.HubNkey, "HUB_CA": &c.HubCA,
		"HUB_CREDS": &c.HubCreds, "KEY_FILE": &c.KeyFile, "STORE_KEY_FILE": &c.StoreKeyFile,
	}); err != nil {
		return err
	}
	// "tls://a:7422, tls://b:7422" is how a list is written by hand: the
	// space made the second URL unparsable (a first path segment with a
	// colon), and a trailing comma an empty one.
	urls := c.HubURLs[:0]
	for _, u := range c.HubURLs {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	c.HubURLs = urls
	// "a.example, b.example" likewise: the view compared " b.example"
	// with the Host and answered 421. An IPv6 address loses the brackets
	// a Host header puts round it, as the view's comparison cuts them off
	// the Host. Empty entries stay, for Validate to name.
	for i, h := range c.WebHosts {
		h = strings.TrimSpace(h)
		if inner, ok := strings.CutPrefix(h, "["); ok && strings.HasSuffix(inner, "]") && net.ParseIP(strings.TrimSuffix(inner, "]")) != nil {
			h = strings.TrimSuffix(inner, "]")
		}
		c.WebHosts[i] = h
	}
	needHome := func() (string, error) {
		h, err := home()
		if err != nil || h == "" {
			return "", fmt.Errorf("config: no home directory (%v): set %s_SESSIONS_DIR and %s_STATE_DIR", err, Prefix, Prefix)
		}
		return h, nil
	}
	if c.SessionsDir == "" {
		agent := getenv("PI_CODING_AGENT_DIR")
		if agent == "" || agent == "~" || strings.HasPrefix(agent, "~/") {
			h, err := needHome()
			if err != nil {
				return err
			}
			switch {
			case agent == "":
				agent = filepath.Join(h, ".pi", "agent")
			case agent == "~":
				agent = h
			default:
				agent = filepath.Join(h, agent[2:])
			}
		}
		if !filepath.IsAbs(agent) {
			// pi finds it from the folder it runs in too: each pi in a
			// project of its own would have its own sessions.
			return fmt.Errorf("PI_CODING_AGENT_DIR %q is a relative path, which pi and pisyncd find from the folder each runs in: give an absolute path, or set %s_SESSIONS_DIR", agent, Prefix)
		}
		c.SessionsDir = filepath.Join(agent, "sessions")
	}
	if c.StateDir == "" {
		if x := getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
			c.StateDir = filepath.Join(x, "pisyncd")
		} else {
			h, err := needHome()
			if err != nil {
				return err
			}
			if runtime.GOOS == "darwin" {
				c.StateDir = filepath.Join(h, "Library", "Application Support", "pisyncd")
			} else {
				c.StateDir = filepath.Join(h, ".local", "state", "pisyncd")
			}
		}
	}
	var err error
	if c.SessionsDir, err = filepath.Abs(c.SessionsDir); err != nil {
		return fmt.Errorf("config: sessions dir: %w", err)
	}
	if c.StateDir, err = filepath.Abs(c.StateDir); err != nil {
		return fmt.Errorf("config: state dir: %w", err)
	}
	return nil
}

// Validate checks values that envconfig cannot.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeID != "" && !eventlog.ValidNodeID(c.NodeID) {
		errs = append(errs, fmt.Errorf("%s_NODE_ID %q: want 1 to 64 characters of [A-Za-z0-9_-]", Prefix, c.NodeID))
	}
	errs = append(errs, checkLogging(Prefix, c.LogLevel, c.LogFormat)...)
	for name, addr := range map[string]string{"HTTP_ADDR": c.HTTPAddr, "LISTEN": c.Listen} {
		if addr != "" {
			if err := CheckLoopback(addr); err != nil {
				errs = append(errs, fmt.Errorf("%s_%s: %w", Prefix, name, err))
			}
		}
	}
	if c.HTTPAddr != "" && c.HTTPAddr == c.Listen {
		// Else the second listener is told the address is another
		// program's, when it is this daemon's own.
		errs = append(errs, fmt.Errorf("%s_HTTP_ADDR and %s_LISTEN are both %s: the web view and the NATS listener need an address each", Prefix, Prefix, c.HTTPAddr))
	}
	if _, err := parseRules(c.Rules); err != nil {
		errs = append(errs, err)
	}
	switch c.Encrypt {
	case "", "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("%s_ENCRYPT %q: want auto, on or off", Prefix, c.Encrypt))
	}
	switch c.HubCompression {
	case "", "auto", "off", "fast", "better", "best": // embedded's names
	default:
		errs = append(errs, fmt.Errorf("%s_HUB_COMPRESSION %q: want auto, off, fast, better or best", Prefix, c.HubCompression))
	}
	switch c.Search {
	case "", "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("%s_SEARCH %q: want auto, on or off", Prefix, c.Search))
	}
	if err := checkStoreCipher(Prefix, c.StoreCipher); err != nil {
		errs = append(errs, err)
	}
	if c.Delete != "trash" && c.Delete != "ignore" {
		errs = append(errs, fmt.Errorf("%s_DELETE %q: want trash or ignore", Prefix, c.Delete))
	}
	errs = append(errs, checkTrustedNodes(c.TrustedNodes), checkWebHosts(c.WebHosts))
	if c.RemoteSessionsPerHour < 0 || c.RemoteBytesPerHour < 0 {
		errs = append(errs, fmt.Errorf("%s_REMOTE_SESSIONS_PER_HOUR and %s_REMOTE_BYTES_PER_HOUR: want 0 (no limit) or more", Prefix, Prefix))
	}
	if c.IdleAfter > maxIdleAfter {
		errs = append(errs, fmt.Errorf("%s_IDLE_AFTER %v: want at most %v: remote lines wait for a file pi has not written for this long, so a session in use would get none", Prefix, c.IdleAfter, maxIdleAfter))
	}
	if c.IdleAfter < minIdleAfter && c.IdleAfter != 0 { // 0: unset (Load refuses it, naming the default)
		errs = append(errs, fmt.Errorf("%s_IDLE_AFTER %v: want at least %v: a line pi leaves without its newline for 60 times this long is taken for a crash's and ended, and a slow writer's line would be cut", Prefix, c.IdleAfter, minIdleAfter))
	}
	if len(c.HubURLs) == 0 {
		var set []string
		for name, v := range map[string]string{"HUB_CREDS": c.HubCreds, "HUB_NKEY": c.HubNkey, "HUB_CA": c.HubCA} {
			if v != "" {
				set = append(set, Prefix+"_"+name)
			}
		}
		if len(set) > 0 {
			slices.Sort(set)
			verb, them := "is", "it"
			if len(set) > 1 {
				verb, them = "are", "them"
			}
			errs = append(errs, fmt.Errorf("%s %s set but %s_HUB_URLS is not, and only a hub's link reads %s: set %s_HUB_URLS to the hub's leaf URLs, or unset %s",
				strings.Join(set, " and "), verb, Prefix, them, Prefix, them))
		}
	}
	if c.HubCreds != "" && c.HubNkey != "" {
		errs = append(errs, fmt.Errorf("set %s_HUB_CREDS or %s_HUB_NKEY, not both", Prefix, Prefix))
	}
	if err := c.checkHubTransport(); err != nil {
		errs = append(errs, err)
	}
	if c.RescanInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("%s_RESCAN_INTERVAL %v: want at least 100ms", Prefix, c.RescanInterval))
	}
	lineOK := c.MaxLine >= 1<<10 && c.MaxLine <= 200<<20
	if !lineOK {
		errs = append(errs, fmt.Errorf("%s_MAX_LINE %v: want 1KiB to 200MiB (a line is one atomic batch of 256KiB chunks)", Prefix, c.MaxLine))
	}
	if c.MaxStore < 64<<20 {
		errs = append(errs, fmt.Errorf("%s_MAX_STORE %v: want at least 64MiB", Prefix, c.MaxStore))
	}
	// The budget a line out of range would need is no advice: raising
	// it as told met the range error next.
	if err := c.checkMemoryBudget(); err != nil && lineOK {
		errs = append(errs, err)
	}
	if c.MaxMemory < 16<<20 {
		errs = append(errs, fmt.Errorf("%s_MAX_MEMORY %v: want at least 16MiB", Prefix, c.MaxMemory))
	}
	if c.Workers < 1 || c.Workers > 256 {
		errs = append(errs, fmt.Errorf("%s_WORKERS %d: want 1 to 256", Prefix, c.Workers))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s_SHUTDOWN_TIMEOUT %v: want a positive duration", Prefix, c.ShutdownTimeout))
	}
	errs = append(errs, checkFolder(Prefix+"_SESSIONS_DIR", c.SessionsDir), checkStateDir(Prefix+"_STATE_DIR", c.StateDir))
	if err := checkStateOutsideSessions(c.SessionsDir, c.StateDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkStateOutsideSessions refuses a state dir in the sessions dir (or
// the sessions dir itself), where the tailer would watch the daemon's own
// store. The paths are compared as they really are: compared as written,
// a symbolic link on either side (STATE_DIR=x/link/st with x/link a link
// to the sessions dir x/s, or SESSIONS_DIR=x/link with STATE_DIR=x/s/st)
// put the state dir in the sessions tree unseen.
func checkStateOutsideSessions(sessions, state string) error {
	rs, rt := realPath(sessions), realPath(state)
	rel, err := filepath.Rel(rs, rt)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil
	}
	how := ""
	if rs != sessions || rt != state {
		how = fmt.Sprintf(" (through a symbolic link: the state dir is %s, the sessions dir %s)", rt, rs)
	}
	return fmt.Errorf("%s_STATE_DIR %s lies inside %s_SESSIONS_DIR %s%s, where the daemon would watch its own store: set %s_STATE_DIR to a folder outside the sessions dir",
		Prefix, state, Prefix, sessions, how, Prefix)
}

// realPath is p with the symbolic links of its longest existing prefix
// resolved: the state dir (or the sessions dir) may not exist yet, made at
// start under a folder that does. p is absolute (fillDefaults); an error
// of the file system leaves the part it cannot read as written.
func realPath(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

// checkStoreCipher checks a STORE_CIPHER setting: the names
// embedded.ParseStoreCipher takes (config stays clear of nats-server).
func checkStoreCipher(prefix, v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "off", "chachapoly", "aes":
		return nil
	}
	return fmt.Errorf("%s_STORE_CIPHER %q: want off, chachapoly or aes", prefix, v)
}

// checkHubTransport refuses credentials (an nkey, a .creds file, or a
// user in a hub URL) that would cross a plain-text connection to another
// machine: a hub URL that is nats:// (or ws://) to a host that is not
// loopback, with no PISYNC_HUB_CA (a CA makes the connection TLS whatever
// the scheme). PISYNC_HUB_INSECURE=true allows it; the daemon then warns.
func (c *Config) checkHubTransport() error {
	for i, s := range c.HubURLs {
		if !strings.Contains(s, "://") {
			shown := fmt.Sprintf("%q", s)
			if strings.Contains(s, "@") {
				shown = fmt.Sprintf("(its URL %d)", i+1) // it may hold a password
			}
			return fmt.Errorf("%s_HUB_URLS %s has no scheme: write tls://HOST:PORT (the hub's leaf port, 7422 unless set otherwise), or nats://HOST:PORT on a network you trust", Prefix, shown)
		}
		// The schemes and the host the embedded server takes
		// (embedded.parseHubURL), checked here so that the error names
		// the variable; it came from the server's start as "embedded:
		// config: hub URL: ftp://x". Redacted: a URL may hold a password.
		u, err := url.Parse(s)
		switch {
		case err != nil:
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL it quotes
			}
			return fmt.Errorf("%s_HUB_URLS %s: %v", Prefix, redact.URL(s), err)
		case !slices.Contains([]string{"nats", "tls", "nats-leaf", "ws", "wss"}, u.Scheme):
			return fmt.Errorf("%s_HUB_URLS %s: want tls://HOST:PORT (or nats://, wss://, ws://) of the hub's leaf listener (7422 unless set otherwise)", Prefix, redact.URL(s))
		case u.Host == "":
			return fmt.Errorf("%s_HUB_URLS %s: no host: want tls://HOST:PORT of the hub's leaf listener", Prefix, redact.URL(s))
		case u.Port() != "" && !validPort(u.Port()):
			// Before, it ran and logged "invalid port" at every attempt.
			return fmt.Errorf("%s_HUB_URLS %s: port %s: want 1 to 65535 (the hub's leaf listener, 7422 unless set otherwise)", Prefix, redact.URL(s), u.Port())
		}
	}
	if c.HubInsecure || c.HubCA != "" {
		return nil
	}
	creds := c.HubNkey != "" || c.HubCreds != ""
	var plain []string
	for _, s := range c.HubURLs {
		u, _ := url.Parse(s) // parsed above
		if u.User != nil {
			creds = true
		}
		if redact.PlainRemote(u) {
			plain = append(plain, redact.URL(s))
		}
	}
	if !creds || len(plain) == 0 {
		return nil
	}
	return fmt.Errorf("%s_HUB_URLS: %s is plain text, and this node's hub credentials would cross it readable by anyone on the way: use tls:// with %s_HUB_CA (the hub's CA), or set %s_HUB_INSECURE=true on a network you trust",
		Prefix, strings.Join(plain, ", "), Prefix, Prefix)
}

// validPort reports whether p is a TCP port, 1 to 65535, in base 10.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

// CheckLoopback accepts host:port addresses on the loopback interface only:
// pisyncd never listens on the network unless told to, and then only
// locally.
func CheckLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("address %q: no port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q: port %q is not a number from 0 to 65535", addr, port)
	}
	if strings.EqualFold(host, "localhost") { // a host name in any case: LOCALHOST was refused
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q is not a loopback address (127.0.0.0/8, ::1 or localhost)", addr)
	}
	return nil
}

// RuleSet is the rule set PISYNC_RULES names (Validate has checked it).
func (c *Config) RuleSet() session.RuleSet {
	r, _ := parseRules(c.Rules)
	return r
}

// parseRules reads a PISYNC_RULES value; the error names the variable.
// "" is auto: the zero Config (a literal in a test or a program embedding
// pisyncd) means the default, as for the other settings.
func parseRules(s string) (session.RuleSet, error) {
	if s == "" {
		return session.RulesAuto, nil
	}
	r, err := session.ParseRuleSet(s)
	if err != nil {
		return 0, fmt.Errorf("%s_RULES %q: want auto, seed or pi-1.6", Prefix, s)
	}
	return r, nil
}

// SlogLevel parses LogLevel.
func (c *Config) SlogLevel() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, fmt.Errorf("%s_LOG_LEVEL %q: want debug, info, warn or error", Prefix, c.LogLevel)
	}
	return l, nil
}

// checkLogging checks the log settings of the daemon or the hub, named
// with their own prefix.
func checkLogging(prefix, level, format string) []error {
	var errs []error
	if err := new(slog.Level).UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Errorf("%s_LOG_LEVEL %q: want debug, info, warn or error", prefix, level))
	}
	// Either case, as LOG_LEVEL (JSON was refused where DEBUG was taken).
	if !strings.EqualFold(format, "text") && !strings.EqualFold(format, "json") {
		errs = append(errs, fmt.Errorf("%s_LOG_FORMAT %q: want text or json", prefix, format))
	}
	return errs
}

// Logger builds the daemon's logger from LogLevel and LogFormat.
func (c *Config) Logger(w io.Writer) *slog.Logger {
	lvl, _ := c.SlogLevel()
	opts := &slog.HandlerOptions{Level: lvl}
	if strings.EqualFold(c.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// EnsureNodeID settles the node id and keeps it with the store it names:
// the configured one, else the one stored in StateDir/node-id, else a new
// UUID; whichever it is, StateDir/node-id (0600) holds it from then on. A
// store's lines were published under its node's id, so another id over the
// same store would find none of them its own and publish every session
// again, as new lines of a new node (and, with a hub, to every machine):
// a configured id that differs from the stored one is refused, and so is
// a store without a stored id (made before the id was kept with it, under
// a configured one) when none is configured. hasStore says whether the
// state dir holds a store already.
func (c *Config) EnsureNodeID(hasStore bool) error {
	path := filepath.Join(c.StateDir, "node-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !eventlog.ValidNodeID(id) {
			return fmt.Errorf("config: %s holds an invalid node id %q (damaged or edited): write this node's id back into it (`pisyncd status` showed it as node; with a hub, `pisyncd hub nodes` lists it; in a store in clear, `grep -raom1 'pi\\.evt\\.[A-Za-z0-9_-]*' %s` finds it after pi.evt.)", path, id, filepath.Join(c.StateDir, "jetstream"))
		}
		if c.NodeID != "" && c.NodeID != id {
			return fmt.Errorf("%s_NODE_ID %q: the state dir %s belongs to node %q (its node-id file), and the lines in its store were published under that id; under another, pisyncd would publish every session again as new lines. "+
				"Unset %s_NODE_ID or set it to %q (with a hub, register that name: pisyncd hub add-node %s), or give the new id a state dir of its own (%s_STATE_DIR)",
				Prefix, c.NodeID, c.StateDir, id, Prefix, id, id, Prefix)
		}
		c.NodeID = id
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s_STATE_DIR: node id: %w", Prefix, err)
	case c.NodeID == "" && hasStore:
		return fmt.Errorf("%s_NODE_ID is unset and the state dir %s holds a store but no node-id file: it was made under a configured id. Set %s_NODE_ID to that id again (where it was set before: the service's settings, e.g. ~/.config/pisyncd/env); a new id would publish every session again as new lines",
			Prefix, c.StateDir, Prefix)
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return fmt.Errorf("%s_STATE_DIR: %w%s", Prefix, err, WriteHint(err, "STATE_DIR"))
	}
	if c.NodeID == "" {
		c.NodeID = uuid.NewString()
	}
	if err := fsutil.WriteFileAtomic(path, []byte(c.NodeID+"\n")); err != nil {
		return fmt.Errorf("%s_STATE_DIR: node id: %w%s", Prefix, err, WriteHint(err, "STATE_DIR"))
	}
	return nil
}

// WriteHint says how to mend a folder setting (name, as STATE_DIR) that
// this user may not write, or that is on a read-only file system; "" for
// another error.
func WriteHint(err error, name string) string {
	switch {
	case errors.Is(err, fs.ErrPermission):
		if own := fsutil.OwnFolderHint(err); own != "" {
			return ": " + own
		}
		return fmt.Sprintf(": this user (uid %d) may not write there: set %s_%s to a folder it owns, or give it this one (chown)", os.Geteuid(), Prefix, name)
	case errors.Is(err, syscall.EROFS):
		return fmt.Sprintf(": the file system is read-only: set %s_%s to a folder on a writable one", Prefix, name)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf(": a file stands where a folder of the path should be: set %s_%s to a folder", Prefix, name)
	case errors.Is(err, fs.ErrExist):
		// MkdirAll over a link to nothing, or a file in the folder's place.
		return fmt.Sprintf(": something that is not a folder is there (a file, or a link to nothing): set %s_%s to a folder, or mend the link", Prefix, name)
	}
	return ""
}

// Usage writes the table of variables for --help.
func Usage(w io.Writer) error {
	return usage(w, Prefix, &Config{})
}

// usage writes the table of spec's variables, its columns aligned.
func usage(w io.Writer, prefix string, spec any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if err := envconfig.Usagef(prefix, spec, tw, usageFormat); err != nil {
		return err
	}
	return tw.Flush()
}

const usageFormat = `VARIABLE	DEFAULT	DESCRIPTION
{{range .}}{{usage_key .}}	{{usage_default .}}	{{usage_description .}}
{{end}}`

// checkTrustedNodes names each bad entry once: ",," would otherwise give
// the same line for every empty name, and an empty name is a stray comma.
func checkTrustedNodes(nodes []string) error {
	var bad []string
	for _, n := range nodes {
		if n == "*" || eventlog.ValidNodeID(n) {
			continue
		}
		if n == "" {
			n = "an empty name (a stray comma?)"
		} else {
			n = strconv.Quote(n)
		}
		if !slices.Contains(bad, n) {
			bad = append(bad, n)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s_TRUSTED_NODES: %s: want comma-separated node ids ([A-Za-z0-9_-]{1,64}) or *", Prefix, strings.Join(bad, ", "))
}

// checkWebHosts refuses PISYNC_WEB_HOSTS entries that can never match a
// Host header as the view compares it (web's hostAllowed: the name alone,
// its port cut off, case and a final dot aside), each named once with
// why: they were taken without a word, and the view answered 421 to the
// very name the user meant. A port is refused rather than compared: the
// view answers on PISYNC_HTTP_ADDR's port, and a proxy in front of it may
// reach it under another.
func checkWebHosts(hosts []string) error {
	var bad []string
	for _, h := range hosts {
		why := webHostProblem(h)
		if why == "" {
			continue
		}
		if !slices.Contains(bad, why) {
			bad = append(bad, why)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%s_WEB_HOSTS: %s: want comma-separated host names (pi.example) or IP addresses, each as the Host header names it, without its port", Prefix, strings.Join(bad, "; "))
}

// webHostProblem says what keeps h from naming a host, "" when nothing
// does.
func webHostProblem(h string) string {
	q := strconv.Quote(h)
	switch {
	case h == "":
		return "an empty name (a stray comma?)"
	case strings.Contains(h, "://"):
		return q + " has a scheme: give the host name alone"
	case strings.Contains(h, "*"):
		return q + " is a wildcard, which is not taken: name each host"
	case strings.Contains(h, "/"):
		return q + " has a path: give the host name alone"
	}
	if net.ParseIP(h) != nil {
		return ""
	}
	if _, port, err := net.SplitHostPort(h); err == nil {
		return fmt.Sprintf("%s has a port: give the name alone (the Host header's port, %s or any other, is not compared)", q, port)
	}
	name := strings.TrimSuffix(h, ".")
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
			return q + " is not a host name or IP address"
		}
	}
	return ""
}
