package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestRenderedHubConfigRefusesStrangers loads the configuration `pisyncd
// hub config` prints into a stock nats-server: with no node registered
// yet, and with one, an unauthenticated client is refused; the node's key
// is accepted.
func TestRenderedHubConfigRefusesStrangers(t *testing.T) {
	for _, withNode := range []bool{false, true} {
		dir := t.TempDir()
		client, leaf := testenv.FreeAddr(t), testenv.FreeAddr(t)
		cfg := HubConfig{StateDir: dir, Name: "stock", Listen: client, LeafListen: leaf, Auth: true, NodesDir: filepath.Join(dir, "nodes")}
		var seed []byte
		if withNode {
			var err error
			if seed, err = AddNode(cfg.NodesDir, "ws-a", ""); err != nil {
				t.Fatal(err)
			}
		}
		nodes, err := LoadNodes(cfg.NodesDir)
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "stock.conf")
		text, err := RenderHubConfig(cfg, nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(conf, []byte(text), 0o600)
		opts, err := server.ProcessConfigFile(conf)
		if err != nil {
			t.Fatalf("stock server cannot load the rendered config: %v", err)
		}
		opts.NoSigs, opts.NoLog = true, true
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(10e9) {
			t.Fatal("not ready")
		}
		if nc, err := nats.Connect("nats://" + client); err == nil {
			nc.Close()
			t.Errorf("withNode=%v: an unauthenticated client was accepted", withNode)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("withNode=%v: %v", withNode, err)
		}
		if withNode {
			p := filepath.Join(dir, "ws-a.nkey")
			os.WriteFile(p, seed, 0o600)
			opt, _ := nats.NkeyOptionFromSeed(p)
			nc, err := nats.Connect("nats://"+client, opt)
			if err != nil {
				t.Errorf("registered node refused: %v", err)
			} else {
				nc.Close()
			}
		}
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}
