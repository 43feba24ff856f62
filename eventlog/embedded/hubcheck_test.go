package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubConfigRejectsInjection: no setting rendered into the hub's
// configuration can end its quoted string or comment and bring lines of
// its own: a newline or a quote in the name (which went into a comment
// unquoted), the cluster name, a route, a path or a listen address is
// refused with an error naming the setting, by RenderHubConfig (what `hub
// config` prints) and by StartHub. Credentials in a route are refused too:
// they come from the route secret.
func TestHubConfigRejectsInjection(t *testing.T) {
	inject := "x\"\nleafnodes { listen: \"0.0.0.0:9999\" }\n# "
	secret := "route-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	base := func() HubConfig {
		return HubConfig{
			StateDir: t.TempDir(), Name: "h1", Listen: "127.0.0.1:4222", LeafListen: "127.0.0.1:7422",
			ClusterName: "pisyncd", ClusterListen: "127.0.0.1:6222", Routes: []string{"nats://h2:6222"},
			RouteSecret: secret, TLS: &HubTLS{CertFile: "/c/hub.pem", KeyFile: "/c/hub-key.pem", CAFile: "/c/ca.pem"},
			Auth: true, NodesDir: t.TempDir(),
		}
	}
	if _, err := RenderHubConfig(base(), nil, nil); err != nil {
		t.Fatalf("the base configuration is refused: %v", err)
	}
	for _, tc := range []struct {
		setting string
		edit    func(*HubConfig)
	}{
		{"PISYNC_HUB_NAME", func(c *HubConfig) { c.Name = "h1\nleafnodes { listen: \"0.0.0.0:9999\" }" }},
		{"PISYNC_HUB_NAME", func(c *HubConfig) { c.Name = `h1"` }},
		{"PISYNC_HUB_NAME", func(c *HubConfig) { c.Name = "h 1" }},
		{"PISYNC_HUB_CLUSTER_NAME", func(c *HubConfig) { c.ClusterName = inject }},
		{"PISYNC_HUB_ROUTES", func(c *HubConfig) { c.Routes = []string{"nats://h2:6222\"\n  authorization { user: a }"} }},
		{"PISYNC_HUB_ROUTES", func(c *HubConfig) { c.Routes = []string{"nats://h2:6222/x?y"} }},
		{"PISYNC_HUB_ROUTES", func(c *HubConfig) { c.Routes = []string{"nats://pisyncd-route:guess@h2:6222"} }},
		{"PISYNC_HUB_STATE_DIR", func(c *HubConfig) { c.StateDir = "/var/lib/" + inject }},
		{"PISYNC_HUB_TLS_CERT", func(c *HubConfig) { c.TLS.CertFile = "/c/" + inject }},
		{"PISYNC_HUB_TLS_KEY", func(c *HubConfig) { c.TLS.KeyFile = "/c/key\\" }},
		{"PISYNC_HUB_TLS_CA", func(c *HubConfig) { c.TLS.CAFile = "/c/ca\x00" }},
		{"PISYNC_HUB_LISTEN", func(c *HubConfig) { c.Listen = "127.0.0.1\":4222" }},
		{"PISYNC_HUB_LEAF_LISTEN", func(c *HubConfig) { c.LeafListen = "a\nb:7422" }},
		{"PISYNC_HUB_CLUSTER_LISTEN", func(c *HubConfig) { c.ClusterListen = "0.0.0.0:6222\"" }},
		{"PISYNC_HUB_ROUTE_SECRET", func(c *HubConfig) { c.RouteSecret = secret + "\"\n" }},
	} {
		cfg := base()
		tc.edit(&cfg)
		conf, err := RenderHubConfig(cfg, nil, nil)
		if err == nil {
			t.Errorf("%s: rendered:\n%s", tc.setting, conf)
			continue
		}
		if !strings.Contains(err.Error(), tc.setting) {
			t.Errorf("%s: error %q does not name the setting", tc.setting, err)
		}
		if strings.Contains(err.Error(), "guess") || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q prints a secret", tc.setting, err)
		}
		if s, err := StartHub(context.Background(), cfg); err == nil {
			s.Close()
			t.Errorf("%s: StartHub started", tc.setting)
		}
	}
}

// TestTeamShares: each team's account gets its share of the node's store
// and memory (the node's limit divided by the number of teams), one stream
// and its nodes plus 8 consumers. A team added by a reload shrinks the
// other shares first: a single nats-server reserves every account's share
// and would refuse the new account beside the old shares.
func TestTeamShares(t *testing.T) {
	dir := t.TempDir()
	cfg := HubConfig{
		StateDir: dir, Name: "h", LeafListen: testenv.FreeAddr(t), Auth: true, NodesDir: filepath.Join(dir, "nodes"),
		MaxStore: 12 << 20, MaxMemory: 12 << 20,
	}
	if _, err := AddNode(cfg.NodesDir, "ws-r", "red"); err != nil {
		t.Fatal(err)
	}
	s := startHub(t, cfg)
	limits := func(team string) jetstream.AccountLimits {
		t.Helper()
		nc, err := s.ConnectTeam(team)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		info, err := js.AccountInfo(testCtx(t))
		if err != nil {
			t.Fatalf("team %s: %v", team, err)
		}
		return info.Limits
	}
	if l := limits("red"); l.MaxStore != 6<<20 || l.MaxMemory != 6<<20 || l.MaxStreams != 2 || l.MaxConsumers != 9 {
		t.Fatalf("red's limits with two teams: %+v", l)
	}
	for _, team := range []string{"blue", "green"} {
		if _, err := AddNode(cfg.NodesDir, "ws-"+team, team); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("reload with two new teams: %v", err)
	}
	for _, team := range []string{DefaultTeam, "red", "blue", "green"} {
		if l := limits(team); l.MaxStore != 3<<20 || l.MaxMemory != 3<<20 {
			t.Errorf("%s's limits with four teams: %+v", team, l)
		}
	}

	// Explicit shares that do not fit the node are refused.
	cfg.Team.MaxStore = 5 << 20 // three teams: 15 MiB on a 12 MiB node
	if _, err := RenderHubConfig(cfg, []Node{{Name: "a", Team: "red", Nkey: mustNodeKey(t)}, {Name: "b", Team: "blue", Nkey: mustNodeKey(t)}}, nil); err == nil ||
		!strings.Contains(err.Error(), "PISYNC_HUB_TEAM_MAX_STORE") {
		t.Errorf("three teams of 5 MiB on 12 MiB: err %v, want a refusal naming PISYNC_HUB_TEAM_MAX_STORE", err)
	}
}

func mustNodeKey(t *testing.T) string {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return pub
}

// TestReloadWhileTeamsAreRead: reloads that add teams (SIGHUP and the
// control socket's, at once) while the share watch and control requests
// list the teams and take their admin keys to connect. Under -race it
// fails without the locks around the teams' admin keys and around a
// reload. (The readers do not connect: an in-process connection still in
// its handshake when a reload closes it waits out the server's 10 s write
// deadline on the pipe, which says nothing of the keys.)
func TestReloadWhileTeamsAreRead(t *testing.T) {
	dir := t.TempDir()
	cfg := HubConfig{
		StateDir: dir, Name: "h", LeafListen: testenv.FreeAddr(t), Auth: true, NodesDir: filepath.Join(dir, "nodes"),
		MaxStore: 64 << 20, MaxMemory: 64 << 20,
	}
	if _, err := AddNode(cfg.NodesDir, "ws-0", "t0"); err != nil {
		t.Fatal(err)
	}
	s := startHub(t, cfg)
	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				for _, team := range s.Teams() {
					if s.adminKey(team) == nil {
						t.Errorf("team %s listed without its admin key", team)
						return
					}
				}
				s.Nodes()
			}
		})
	}
	var reloads sync.WaitGroup
	for i := 1; i <= 4; i++ {
		if _, err := AddNode(cfg.NodesDir, fmt.Sprintf("ws-%d", i), fmt.Sprintf("t%d", i)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			reloads.Go(func() {
				if err := s.Reload(); err != nil {
					t.Errorf("reload with team t%d: %v", i, err)
				}
			})
		}
		reloads.Wait()
	}
	close(done)
	readers.Wait()
	got := s.Teams()
	if len(got) != 6 { // the default team, t0-t4
		t.Errorf("teams after the reloads: %v", got)
	}
	if n := len(s.Nodes()); n != 5 {
		t.Errorf("the hub admits %d nodes after the reloads, want 5", n)
	}
	for _, team := range got {
		nc, err := s.ConnectTeam(team)
		if err != nil {
			t.Errorf("connect to team %s after the reloads: %v", team, err)
			continue
		}
		nc.Close()
	}
}

// TestTeamKeptAfterItsLastNode: a team whose last node is removed keeps
// its account and the hub's way into it until the hub restarts: its
// PI_HUB holds what the node published, to erase (`hub remove-node
// --erase`) and to watch. Without the admin user rendered for it, the
// reload left the account with no user, and the hub's own connection was
// refused (io: read/write on closed pipe).
func TestTeamKeptAfterItsLastNode(t *testing.T) {
	dir := t.TempDir()
	cfg := HubConfig{
		StateDir: dir, Name: "h", LeafListen: testenv.FreeAddr(t), Auth: true, NodesDir: filepath.Join(dir, "nodes"),
		MaxStore: 64 << 20, MaxMemory: 64 << 20,
	}
	for _, n := range []string{"ann", "eve"} {
		team := map[string]string{"ann": DefaultTeam, "eve": "t1"}[n]
		if _, err := AddNode(cfg.NodesDir, n, team); err != nil {
			t.Fatal(err)
		}
	}
	s := startHub(t, cfg)
	if _, err := RemoveNode(cfg.NodesDir, "eve"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatalf("reload without t1's last node: %v", err)
	}
	if got := s.Teams(); !slices.Contains(got, "t1") {
		t.Fatalf("teams after t1's last node went: %v", got)
	}
	nc, err := s.ConnectTeam("t1")
	if err != nil {
		t.Fatalf("the hub's connection to t1 after its last node went: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := js.AccountInfo(testCtx(t)); err != nil {
		t.Fatalf("t1's JetStream after its last node went: %v", err)
	}
}

// TestFailedReloadChangesNothing: a reload the hub refuses leaves it as it
// was: no account for the team it would have added (before, the team was
// kept, listed by usage and erase, and given a PI_HUB), and a registration
// that holds another's key is refused by pisyncd's own check, naming both
// files (before, nats-server refused the generated configuration, after
// part of the reload was applied).
func TestFailedReloadChangesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := HubConfig{
		StateDir: dir, Name: "h", LeafListen: testenv.FreeAddr(t), Auth: true, NodesDir: filepath.Join(dir, "nodes"),
		MaxStore: 64 << 20, MaxMemory: 64 << 20, Team: TeamLimits{MaxStore: 30 << 20, MaxMemory: 30 << 20},
	}
	if _, err := AddNode(cfg.NodesDir, "ws-0", "t0"); err != nil {
		t.Fatal(err)
	}
	s := startHub(t, cfg)
	before := s.Teams()
	// A third share of 30 MiB does not fit in 64: nats-server refuses it.
	if _, err := AddNode(cfg.NodesDir, "ws-1", "t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("a reload past the store's size was taken")
	}
	if got := s.Teams(); !slices.Equal(got, before) {
		t.Errorf("teams after a failed reload: %v, want %v", got, before)
	}
	if err := os.Remove(filepath.Join(cfg.NodesDir, "ws-1.json")); err != nil {
		t.Fatal(err)
	}
	// A hand-written registration of another team with ws-0's key.
	nodes, err := LoadNodes(cfg.NodesDir)
	if err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(cfg.NodesDir, "ws-q.json")
	b, _ := json.Marshal(Node{Name: "ws-q", Team: "t2", Nkey: nodes[0].Nkey})
	if err := os.WriteFile(dup, b, 0o600); err != nil {
		t.Fatal(err)
	}
	err = s.Reload()
	if err == nil || !strings.Contains(err.Error(), "ws-0.json and "+dup+" hold the same key") {
		t.Errorf("reload with a key registered twice: %v", err)
	}
	if got := s.Teams(); !slices.Equal(got, before) {
		t.Errorf("teams after a reload with a key registered twice: %v, want %v", got, before)
	}
}
