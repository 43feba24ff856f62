package embedded

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// LocalSubjects never cross the leaf connection. Every workstation has
// streams on the same subjects (PI_LOCAL, PI_ALL, the KV buckets); a stream
// subscribes to its subjects, and that interest would travel through the
// hub to every other workstation, so one node's writes would land in the
// others' streams too (nats-server's cross-domain capture trap). A node's
// events reach the hub only through the forwarder, on pi.up.<node>.>.
var LocalSubjects = []string{"pi.evt.>", "pi.all.>", "$KV.>", "$O.>"}

func parseHubURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "nats", "tls", "nats-leaf", "ws", "wss":
	default:
		return nil, fmt.Errorf("%q: want nats://, tls:// or wss:// host:port of the hub's leaf listener", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q: no host", s)
	}
	return u, nil
}

// leafRemote is the solicited leaf connection to the hub.
func leafRemote(cfg Config) (*server.RemoteLeafOpts, error) {
	r := &server.RemoteLeafOpts{
		Credentials: cfg.HubCredsFile,
		Nkey:        string(cfg.HubNkeySeed),
		DenyExports: LocalSubjects,
		DenyImports: LocalSubjects,
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
			pem, err := os.ReadFile(cfg.HubCAFile)
			if err != nil {
				return nil, fmt.Errorf("hub CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("hub CA %s: no certificate in it", cfg.HubCAFile)
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
	return nil
}
