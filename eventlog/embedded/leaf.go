package embedded

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/fsutil"
	"github.com/pisyncd/pisyncd/internal/redact"
)

// LocalSubjects never cross the leaf connection. Every workstation has
// streams on the same subjects (PI_LOCAL, PI_ALL, the KV buckets); a stream
// subscribes to its subjects, and that interest would travel through the
// hub to every other workstation, so one node's writes would land in the
// others' streams too (nats-server's cross-domain capture trap). A node's
// events reach the hub only through the forwarder, on pi.up.<node>.>.
var LocalSubjects = []string{"pi.evt.>", "pi.all.>", "pi.park.>", eventlog.LivePrefix + ".>", "$KV.>", "$O.>"}

// privateExports never leave for the hub either: replies and consumer
// deliveries inside this machine go to inboxes, and a hub that subscribed
// to them (a hub operator may) would receive this machine's lines in clear
// however they travel sealed (TestEncryptedRealPi). The local JetStream's
// advisories too: an API audit quotes every request, and a consumer's
// filter names a session (TestHubRelaysNoClearNames).
func privateExports(node string) []string {
	return []string{"_INBOX.>", InboxPrefix(node) + ".>", "$JS.EVENT.>"}
}

// privateImports are never taken from the hub: this machine's own
// JetStream API, through which the hub could read its streams.
func privateImports(node string) []string {
	return []string{"$JS.API.>", "$JS." + Domain(node) + ".API.>"}
}

// parseHubURL parses one hub URL. Its errors never quote the URL as
// given: it may carry a password.
func parseHubURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL it quotes
		}
		return nil, fmt.Errorf("%s: %v", redact.URL(s), err)
	}
	switch u.Scheme {
	case "nats", "tls", "nats-leaf", "ws", "wss":
	default:
		return nil, fmt.Errorf("%s: want tls:// (or nats://, wss://, ws://) host:port of the hub's leaf listener", redact.URL(s))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s: no host", redact.URL(s))
	}
	return u, nil
}

// plainHubURL reports whether a connection to u would go without TLS: a
// plain scheme to a host other than loopback, with no CA configured (a CA
// makes every hub URL TLS, see leafRemote). Credentials must never cross
// such a connection: anyone on the path reads them, and a man in the
// middle can also answer for the hub.
func plainHubURL(u *url.URL, caFile string) bool {
	return caFile == "" && redact.PlainRemote(u)
}

// plainCredentialURLs lists, redacted, the hub URLs over which cfg would
// send credentials in plain text: nil when it has no credentials.
func plainCredentialURLs(cfg Config) []string {
	var plain []string
	creds := cfg.HubCredsFile != "" || len(cfg.HubNkeySeed) > 0
	for _, s := range cfg.HubURLs {
		u, err := parseHubURL(s)
		if err != nil {
			continue // reported by withDefaults
		}
		if u.User != nil {
			creds = true
		}
		if plainHubURL(u, cfg.HubCAFile) {
			plain = append(plain, redact.URL(s))
		}
	}
	if !creds {
		return nil
	}
	return plain
}

// leafRemote is the solicited leaf connection to the hub. With a tls://
// or wss:// URL, or a CA, the remote has TLS set, so the server starts the
// TLS handshake after the hub's INFO whatever that INFO says: a man in the
// middle that drops tls_required from it gets a handshake it cannot
// complete, never a CONNECT with the node's credentials
// (TestLeafInsistsOnTLS).
func leafRemote(cfg Config) (*server.RemoteLeafOpts, error) {
	mode, err := compressionMode(cfg.HubCompression)
	if err != nil {
		return nil, err
	}
	r := &server.RemoteLeafOpts{
		Compression: server.CompressionOpts{Mode: mode},
		Credentials: cfg.HubCredsFile,
		Nkey:        string(cfg.HubNkeySeed),
		DenyExports: append(slices.Clone(LocalSubjects), privateExports(cfg.NodeID)...),
		DenyImports: append(slices.Clone(LocalSubjects), privateImports(cfg.NodeID)...),
	}
	secure := cfg.HubCAFile != ""
	for _, s := range cfg.HubURLs {
		u, err := parseHubURL(s)
		if err != nil {
			return nil, err
		}
		if u.Scheme == "tls" || u.Scheme == "wss" {
			secure = true
		}
		r.URLs = append(r.URLs, u)
	}
	if secure {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.HubCAFile != "" {
			pem, err := fsutil.ReadSetting(cfg.HubCAFile, fsutil.SettingMax)
			if err != nil {
				return nil, fmt.Errorf("hub CA (PISYNC_HUB_CA): %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("hub CA %s (PISYNC_HUB_CA): no certificate in it: set it to the CA that signed the hub's certificate (ca.pem of `pisyncd hub certs`), not a key or a seed", cfg.HubCAFile)
			}
			tc.RootCAs = pool
		}
		r.TLS, r.TLSConfig = true, tc
	}
	return r, nil
}

func applyLeaf(opts *server.Options, cfg Config) error {
	if len(cfg.HubURLs) == 0 {
		return nil
	}
	r, err := leafRemote(cfg)
	if err != nil {
		return err
	}
	opts.LeafNode.Remotes = []*server.RemoteLeafOpts{r}
	opts.LeafNode.ReconnectInterval = cfg.LeafReconnect
	if opts.LeafNode.ReconnectInterval == 0 {
		opts.LeafNode.ReconnectInterval = time.Second
	}
	opts.ConnectErrorReports, opts.ReconnectErrorReports = connectErrorReports, connectErrorReports
	return nil
}

// connectErrorReports is how many failed attempts to reach the hub go by
// between two that are logged as errors (the first always is; the others
// are logged at debug). nats-server logs every failed attempt to
// reconnect (its default is 1) and every 3,600th to connect at start: a
// laptop that lost its network logged an error every 1-2 s (the
// interval plus jitter) for as long as it was offline, and one that
// started offline logged one an hour. 40 is about once a minute either
// way; the forwarder and the downloader say the same at their own pace,
// and the server logs the link's return.
const connectErrorReports = 40

// compressionModes maps PISYNC_HUB_COMPRESSION's values to nats-server's
// modes. Each side of a link compresses what it sends in its own mode, and
// off on either side turns it off both ways.
var compressionModes = map[string]string{
	"":       server.CompressionS2Auto,
	"auto":   server.CompressionS2Auto,
	"off":    server.CompressionOff,
	"fast":   server.CompressionS2Fast,
	"better": server.CompressionS2Better,
	"best":   server.CompressionS2Best,
}

func compressionMode(mode string) (string, error) {
	m, ok := compressionModes[mode]
	if !ok {
		return "", fmt.Errorf("compression %q: want auto, off, fast, better or best", mode)
	}
	return m, nil
}
