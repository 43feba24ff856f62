package embedded

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/redact"
)

// What may be written into a hub's configuration file. Every value comes
// from a setting or a file someone else may control; none may end the
// quoted string or the comment it is written into and bring configuration
// of its own (a newline or a quote in PISYNC_HUB_NAME did).
// Compiled on first use, not at init, which every command pays for.
var (
	serverNamePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })
	hostPattern       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9.:%_-]*$`) })
	safeToken         = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]+$`) })
	// A route secret: long enough not to be guessed, and only characters
	// that need no escaping in the configuration (they are escaped in the
	// route URLs). base64 and base64url both fit.
	routeSecretPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._~+/=-]{32,512}$`) })
)

// withHubDefaults fills in the limits and replicas a zero HubConfig means.
func (cfg HubConfig) withHubDefaults() HubConfig {
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = DefaultMaxStore
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Team.MaxLinks == 0 {
		cfg.Team.MaxLinks = DefaultTeamMaxLinks
	}
	return cfg
}

// validate checks every value RenderHubConfig writes, and that a cluster
// listener comes with route authentication. Its messages name the
// settings of `pisyncd hub` that set each value.
func (cfg HubConfig) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !serverNamePattern().MatchString(cfg.Name) {
		bad("hub name %q (PISYNC_HUB_NAME): want 1 to 64 letters, digits, '.', '_' or '-', beginning with a letter or digit", cfg.Name)
	}
	for _, a := range []struct{ setting, addr string }{
		{"PISYNC_HUB_LISTEN", cfg.Listen}, {"PISYNC_HUB_LEAF_LISTEN", cfg.LeafListen}, {"PISYNC_HUB_CLUSTER_LISTEN", cfg.ClusterListen},
	} {
		if a.addr == "" {
			continue
		}
		h, _, err := hostPort(a.addr)
		if err != nil || !hostPattern().MatchString(h) {
			bad("listen address %q (%s): want host:port", a.addr, a.setting)
		}
	}
	paths := []struct{ setting, path string }{{"PISYNC_HUB_STATE_DIR", cfg.StateDir}}
	if cfg.TLS != nil {
		paths = append(paths, struct{ setting, path string }{"PISYNC_HUB_TLS_CERT", cfg.TLS.CertFile},
			struct{ setting, path string }{"PISYNC_HUB_TLS_KEY", cfg.TLS.KeyFile},
			struct{ setting, path string }{"PISYNC_HUB_TLS_CA", cfg.TLS.CAFile})
	}
	for _, p := range paths {
		if strings.ContainsAny(p.path, "\"\\") || strings.ContainsFunc(p.path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			bad("path %q (%s): a quote, a backslash or a control character is not allowed", p.path, p.setting)
		}
	}
	if cfg.RouteSecret != "" && !routeSecretPattern().MatchString(cfg.RouteSecret) {
		bad("route secret (PISYNC_HUB_ROUTE_SECRET): want 32 to 512 characters of [A-Za-z0-9._~+/=-], e.g. `head -c 32 /dev/urandom | base64`")
	}
	if cfg.Team.MaxStore < 0 || cfg.Team.MaxMemory < 0 || cfg.Team.MaxStreams < 0 || cfg.Team.MaxConsumers < 0 || cfg.Team.MaxLinks < 0 {
		bad("team limits (PISYNC_HUB_TEAM_MAX_*): negative")
	}
	if cfg.ClusterListen != "" {
		if !serverNamePattern().MatchString(cfg.ClusterName) {
			bad("cluster name %q (PISYNC_HUB_CLUSTER_NAME): want 1 to 64 letters, digits, '.', '_' or '-', beginning with a letter or digit", cfg.ClusterName)
		}
		for _, r := range cfg.Routes {
			if err := checkRoute(r); err != nil {
				errs = append(errs, err)
			}
		}
		if err := cfg.checkRouteSecurity(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkRoute accepts nats://host:port (or nats-route://, tls://) and
// nothing more: credentials come from the route secret.
func checkRoute(r string) error {
	u, err := url.Parse(r)
	if err != nil {
		return fmt.Errorf("route %s (PISYNC_HUB_ROUTES): want nats://host:port", redact.URL(r))
	}
	if u.User != nil {
		return fmt.Errorf("route %s (PISYNC_HUB_ROUTES): no credentials in a route; routes authenticate with PISYNC_HUB_ROUTE_SECRET", redact.URL(r))
	}
	switch u.Scheme {
	case "nats", "nats-route", "tls":
	default:
		return fmt.Errorf("route %q (PISYNC_HUB_ROUTES): want nats://host:port", r)
	}
	h, p, err := net.SplitHostPort(u.Host)
	if err != nil || h == "" || !hostPattern().MatchString(h) || !safeToken().MatchString(p) ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("route %q (PISYNC_HUB_ROUTES): want nats://host:port", r)
	}
	return nil
}

// checkRouteSecurity refuses a cluster whose routes a stranger could join:
// a route is a full member of the cluster and receives every account's
// messages and stored lines. Routes must present a certificate from the
// hub's CA (TLS with verify) and authenticate with the route secret. An
// open development hub (no Auth: anyone may read everything through its
// leaf listener anyway) still needs the secret but may run routes without
// TLS; StartHub says so loudly.
func (cfg HubConfig) checkRouteSecurity() error {
	var missing []string
	if cfg.RouteSecret == "" {
		missing = append(missing, "PISYNC_HUB_ROUTE_SECRET (a file holding a secret shared by every hub node of the cluster; `pisyncd hub certs` and `hub dev-init` write route.secret)")
	}
	if cfg.Auth && (cfg.TLS == nil || cfg.TLS.CAFile == "") {
		missing = append(missing, "PISYNC_HUB_TLS_CERT, PISYNC_HUB_TLS_KEY and PISYNC_HUB_TLS_CA (routes then require a certificate from that CA)")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("cluster listener %s (PISYNC_HUB_CLUSTER_LISTEN) without route authentication: any server that reaches it could join the cluster and read every team's lines; set %s (docs/HUB.md, \"Securing the cluster\")",
		cfg.ClusterListen, strings.Join(missing, " and "))
}

// validate checks a registration that goes into the configuration.
func (n Node) validate() error {
	if !eventlog.ValidNodeID(n.Name) || !teamPattern().MatchString(n.Team) || !nkeys.IsValidPublicUserKey(n.Nkey) {
		return fmt.Errorf("node %q: invalid name, team or nkey", n.Name)
	}
	return nil
}
