package embedded

import (
	"context"
	"crypto/tls"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// clusterNode is a hub node's configuration for a cluster of two on
// loopback, with the development CA and route secret of certs.
func clusterNode(t *testing.T, name, certs, secret, listen string, peers ...string) HubConfig {
	cfg := HubConfig{
		StateDir: t.TempDir(), Name: name, Listen: testenv.FreeAddr(t), LeafListen: testenv.FreeAddr(t),
		ClusterName: "pisyncd", ClusterListen: listen, RouteSecret: secret, Replicas: 1,
		MaxStore: 256 << 20, MaxMemory: 16 << 20, Auth: true, NodesDir: filepath.Join(t.TempDir(), "nodes"),
		TLS: &HubTLS{CertFile: filepath.Join(certs, "hub.pem"), KeyFile: filepath.Join(certs, "hub-key.pem"), CAFile: filepath.Join(certs, "ca.pem")},
	}
	for _, p := range peers {
		cfg.Routes = append(cfg.Routes, "nats://"+p)
	}
	return cfg
}

// devCluster makes the development CA and hub certificate of a cluster
// of two on loopback in a folder of its own, and returns it with the
// cluster's route secret and its nodes' cluster addresses.
func devCluster(t *testing.T) (certs, secret, a1, a2 string) {
	t.Helper()
	certs = t.TempDir()
	if err := GenerateDevCerts(certs, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	return certs, "route-secret-0123456789abcdefghijklmnopqrstuvwxyz", testenv.FreeAddr(t), testenv.FreeAddr(t)
}

func startHub(t *testing.T, cfg HubConfig) *Server {
	t.Helper()
	s, err := StartHub(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stranger is a bare nats-server that dials route at the hub's cluster
// port: what someone who reaches the port can run.
func stranger(t *testing.T, name, route string, tc *tls.Config) *server.Server {
	t.Helper()
	u, err := url.Parse(route)
	if err != nil {
		t.Fatal(err)
	}
	opts := &server.Options{
		ServerName: name, Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "pisyncd", Host: "127.0.0.1", Port: server.RANDOM_PORT, TLSConfig: tc, TLSTimeout: 5},
		Routes:  []*url.URL{u},
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("stranger not ready")
	}
	return ns
}

// TestStrangerCannotJoinCluster: the three-node example's attack, on two
// nodes. Strangers dial a hub node's cluster port: a bare server in plain
// text; one with a certificate from the hubs' own CA but no route secret;
// one with the route secret but no certificate. None forms a route, while
// a second hub node with both joins. (With the CA-verified certificate
// alone, the second stranger joined before routes authenticated.)
func TestStrangerCannotJoinCluster(t *testing.T) {
	certs, secret, a1, a2 := devCluster(t)
	h1 := startHub(t, clusterNode(t, "h1", certs, secret, a1, a2))

	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "hub.pem"), filepath.Join(certs, "hub-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	strangers := []*server.Server{
		stranger(t, "plain", "nats://"+a1, nil),
		stranger(t, "ca-cert-no-secret", "nats://"+a1, withCert),
		stranger(t, "secret-no-cert", "nats://"+routeUser+":"+secret+"@"+a1, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}),
	}

	h2 := startHub(t, clusterNode(t, "h2", certs, secret, a2, a1))
	waitFor(t, 20*time.Second, "h2 to join h1", func() bool { return h1.NATS().NumRoutes() > 0 && h2.NATS().NumRoutes() > 0 })
	// The strangers dial at start and every second after: by the time a
	// few rounds have passed, each has been turned away several times.
	// h1's own list of routes is the authority: it holds a route only
	// once the route authenticated. A stranger counts its route from h1's
	// INFO until h1 turns its CONNECT away, which on a loaded machine can
	// be caught in a sample; a route that stays through several samples
	// in a row was accepted.
	deadline := time.Now().Add(3 * time.Second)
	routed := make([]int, len(strangers))
	for time.Now().Before(deadline) {
		for i, s := range strangers {
			if s.NumRoutes() == 0 {
				routed[i] = 0
				continue
			}
			if routed[i]++; routed[i] >= 5 {
				t.Fatalf("stranger %s kept a route for %d samples", s.Name(), routed[i])
			}
		}
		rz, err := h1.NATS().Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteName != "h2" {
				t.Fatalf("h1 has a route to %q", r.RemoteName)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClusterNeedsRouteAuth: a cluster listener without the route secret,
// or (authorization on) without TLS and a CA, does not start; the error
// names what is missing and how to fix it. An open development hub may run
// routes without TLS, but only with the secret and a warning in the log.
func TestClusterNeedsRouteAuth(t *testing.T) {
	certs := t.TempDir()
	if err := GenerateDevCerts(certs, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	secret := "route-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	for _, tc := range []struct {
		name string
		edit func(*HubConfig)
		want []string
	}{
		{"docs example: no TLS, no secret", func(c *HubConfig) { c.TLS, c.RouteSecret = nil, "" },
			[]string{"PISYNC_HUB_CLUSTER_LISTEN", "PISYNC_HUB_ROUTE_SECRET", "PISYNC_HUB_TLS_CA", "hub certs"}},
		{"TLS without the secret", func(c *HubConfig) { c.RouteSecret = "" }, []string{"PISYNC_HUB_ROUTE_SECRET"}},
		{"the secret without TLS", func(c *HubConfig) { c.TLS = nil }, []string{"PISYNC_HUB_TLS_CA"}},
		{"a CA-less certificate", func(c *HubConfig) { c.TLS.CAFile = "" }, []string{"PISYNC_HUB_TLS_CA"}},
		{"open, no secret", func(c *HubConfig) { c.Auth, c.TLS, c.RouteSecret = false, nil, "" }, []string{"PISYNC_HUB_ROUTE_SECRET"}},
		{"a short secret", func(c *HubConfig) { c.RouteSecret = "short" }, []string{"PISYNC_HUB_ROUTE_SECRET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clusterNode(t, "h1", certs, secret, testenv.FreeAddr(t))
			tc.edit(&cfg)
			s, err := StartHub(context.Background(), cfg)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q prints the secret", err)
			}
		})
	}
	var log testenv.LogBuffer
	cfg := clusterNode(t, "h1", certs, secret, testenv.FreeAddr(t), testenv.FreeAddr(t))
	cfg.Auth, cfg.TLS, cfg.Logger = false, nil, log.Logger()
	startHub(t, cfg)
	if !strings.Contains(log.String(), "INSECURE") {
		t.Errorf("an open hub's plain-text routes are not in the log:\n%s", log.String())
	}
}

// TestClusterReloadRenewsCert: a hub certificate renewed in place is taken
// by a reload on each node of a cluster (nats-server accepts a route TLS
// change on reload), the routes stay, and the leaf listener then presents
// the new certificate.
func TestClusterReloadRenewsCert(t *testing.T) {
	certs, secret, a1, a2 := devCluster(t)
	c1 := clusterNode(t, "h1", certs, secret, a1, a2)
	h1 := startHub(t, c1)
	h2 := startHub(t, clusterNode(t, "h2", certs, secret, a2, a1))
	routed := func() bool { return h1.NATS().NumRoutes() > 0 && h2.NATS().NumRoutes() > 0 }
	waitFor(t, 20*time.Second, "h2 to join h1", routed)
	trust := testenv.TrustCA(t, filepath.Join(certs, "ca.pem"), "localhost")
	old := testenv.ServedCertSerial(t, c1.LeafListen, trust)

	renewed, err := RenewHubCert(certs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Server{h1, h2} {
		if err := h.Reload(); err != nil {
			t.Fatalf("reload with the renewed certificate: %v", err)
		}
	}
	if got := testenv.ServedCertSerial(t, c1.LeafListen, trust); got.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("after the reload h1 presents serial %v, want the renewed %v (old %v)", got, renewed.SerialNumber, old)
	}
	if !routed() {
		t.Fatal("the reload dropped the route between h1 and h2")
	}
}
