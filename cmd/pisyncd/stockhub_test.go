package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestStockNatsServerHub: the configuration `pisyncd hub config` prints,
// run by stock nats-server code (the server package, as `nats-server -c`
// runs it), with PI_HUB created the way docs/HUB.md says (an administration
// user added for the purpose, the stream's JSON read from the document
// itself), is a hub: two registered workstations replicate a session both
// ways over TLS.
func TestStockNatsServerHub(t *testing.T) {
	h := startSecureHub(t) // paths, certificates and ports; pisyncd hub itself does not run
	seedA, seedB := h.addNode("ws-a", ""), h.addNode("ws-b", "")
	nodes, err := embedded.LoadNodes(h.nodes)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := hubConfig(h.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := embedded.RenderHubConfig(hc, nodes, nil)
	if err != nil {
		t.Fatal(err)
	}
	withAdmin := strings.Replace(conf, "users: [\n", "users: [\n      { user: \"admin\", password: \"change-me\" }\n", 1)
	if withAdmin == conf {
		t.Fatalf("no users list in the rendered configuration:\n%s", conf)
	}
	file := filepath.Join(t.TempDir(), "hub.conf")
	if err := os.WriteFile(file, []byte(withAdmin), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats-server cannot load the rendered configuration: %v", err)
	}
	runNatsServer(t, opts)

	ca := filepath.Join(h.certs, "ca.pem")
	port := strings.Split(h.client, ":")[1]
	nc, err := nats.Connect("tls://localhost:"+port, nats.RootCAs(ca), nats.UserInfo("admin", "change-me"))
	if err != nil {
		t.Fatalf("admin user: %v", err)
	}
	defer nc.Close()
	createDocHubStream(t, nc)

	a := newSecureStation(t, h, "ws-a", seedA, ca)
	b := newSecureStation(t, h, "ws-b", seedB, ca)
	p := writeSession(t, a, "stock-session", 3)
	waitFile(t, b, "stock-session", 4)
	appendLine(t, filepath.Join(b.cfg.SessionsDir, "--sec--", filepath.Base(p)), msgLine("from-b", "stoc-2", "written on B"))
	waitFile(t, a, "stock-session", 5)

	// What each node holds, read as the administration user.
	var out bytes.Buffer
	if err := hubUsageCommand([]string{"--server", "tls://localhost:" + port, "--ca", ca, "--user", "admin", "--password", "change-me", "--json"}, &out); err != nil {
		t.Fatalf("hub usage --server: %v", err)
	}
	var used []hubUsageResult
	if err := json.Unmarshal(out.Bytes(), &used); err != nil || len(used) != 1 {
		t.Fatalf("hub usage --server: %s (%v)", out.Bytes(), err)
	}
	if a, b := used[0].Nodes["ws-a"], used[0].Nodes["ws-b"]; a.Messages != 4 || a.Sessions != 1 || b.Messages != 1 || a.Bytes == 0 {
		t.Errorf("hub usage --server: %s", out.Bytes())
	}
	// The password from a file: --password is in the command's arguments,
	// which every local user reads (ps).
	pw := filepath.Join(t.TempDir(), "admin-password")
	os.WriteFile(pw, []byte("change-me\n"), 0o600)
	out.Reset()
	if err := hubUsageCommand([]string{"--server", "tls://localhost:" + port, "--ca", ca, "--user", "admin", "--password-file", pw, "--json"}, &out); err != nil || !bytes.Equal(bytes.TrimSpace(out.Bytes())[:1], []byte("[")) {
		t.Fatalf("hub usage --password-file: %v %s", err, out.Bytes())
	}
	os.WriteFile(pw, []byte("wrong\n"), 0o600)
	if err := hubUsageCommand([]string{"--server", "tls://localhost:" + port, "--ca", ca, "--user", "admin", "--password-file", pw, "--json"}, &out); err == nil ||
		!strings.Contains(err.Error(), "tls://localhost:"+port+": nats: Authorization Violation: the hub refuses this user and password") {
		t.Errorf("hub usage with a wrong password in --password-file: %v", err)
	}
	// Each mistake named with its fix (before: nats.go's words alone).
	if err := hubUsageCommand([]string{"--server", "tls://localhost:" + port, "--ca", ca}, &out); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--server needs an administration user") {
		t.Errorf("hub usage --server without a user: %v", err)
	}
	if err := hubUsageCommand([]string{"--server", "tls://localhost:" + port, "--user", "admin", "--password-file", pw}, &out); err == nil || !strings.Contains(err.Error(), "pass the CA that signed the hub's certificate with --ca FILE") {
		t.Errorf("hub usage --server without --ca: %v", err)
	}
}

// runNatsServer runs stock nats-server code with opts (signals and logging
// off) until the test ends.
func runNatsServer(t *testing.T, opts *server.Options) {
	t.Helper()
	opts.NoSigs, opts.NoLog = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
}

// createDocHubStream creates PI_HUB over nc, as an administration user, with
// the settings docs/HUB.md gives (what `nats stream add --config` sends).
func createDocHubStream(t *testing.T, nc *nats.Conn) {
	t.Helper()
	for _, name := range []string{"PI_HUB", "PI_KEYS"} {
		resp, err := nc.Request("$JS.API.STREAM.CREATE."+name, docFileJSON(t, strings.ToLower(name)+".json"), 10*time.Second)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		var r struct {
			Error *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &r); err != nil || r.Error != nil {
			t.Fatalf("create %s: %s", name, resp.Data)
		}
	}
}

// docStreamJSON reads PI_HUB's settings from docs/HUB.md, the here-document
// the reader is told to save as pi_hub.json.
func docStreamJSON(t *testing.T) []byte { return docFileJSON(t, "pi_hub.json") }

// docFileJSON reads the JSON here-document docs/HUB.md tells the reader
// to save as name.
func docFileJSON(t *testing.T, name string) []byte {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "HUB.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "cat > "+name+" <<'EOF'\n")
	body, _, ok2 := strings.Cut(rest, "\nEOF")
	if !ok || !ok2 || !json.Valid([]byte(body)) {
		t.Fatalf("docs/HUB.md has no valid %s here-document", name)
	}
	return []byte(body)
}
