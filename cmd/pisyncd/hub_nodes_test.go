package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// hubNodesEnv points the hub's commands at a state dir and a nodes dir of
// the test's own, with no hub running: the dir that holds both, and the
// nodes dir.
func hubNodesEnv(t *testing.T) (dir, nodes string) {
	dir = t.TempDir()
	nodes = filepath.Join(dir, "nodes")
	t.Setenv("PISYNC_HUB_STATE_DIR", filepath.Join(dir, "state"))
	t.Setenv("PISYNC_HUB_NODES_DIR", nodes)
	return dir, nodes
}

// TestAddNodeSaysWhatToSet: add-node names every setting the workstation
// needs, the hub's URL and CA included, and which file to copy besides the
// seed (before: only PISYNC_NODE_ID and PISYNC_HUB_NKEY).
func TestAddNodeSaysWhatToSet(t *testing.T) {
	dir, _ := hubNodesEnv(t)
	var out bytes.Buffer
	if err := addNodeCommand([]string{"ann", "--out", filepath.Join(dir, "ann.nkey")}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "  PISYNC_NODE_ID=ann PISYNC_HUB_NKEY=<path of the seed> PISYNC_HUB_URLS=nats://<this host>:7422\n  (no TLS: PISYNC_HUB_TLS_CERT is unset here, and no hub node runs here to ask)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("without TLS:\n%s\nwant %q", out.String(), want)
	}
	certs := filepath.Join(dir, "certs")
	os.MkdirAll(certs, 0o700)
	os.WriteFile(filepath.Join(certs, "ca.pem"), []byte("ca"), 0o600)
	t.Setenv("PISYNC_HUB_TLS_CERT", filepath.Join(certs, "hub.pem"))
	t.Setenv("PISYNC_HUB_TLS_KEY", filepath.Join(certs, "hub-key.pem"))
	t.Setenv("PISYNC_HUB_LEAF_LISTEN", "0.0.0.0:17422")
	out.Reset()
	if err := addNodeCommand([]string{"bob", "--out", filepath.Join(dir, "bob.nkey")}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"copy it and " + filepath.Join(certs, "ca.pem") + " to the workstation",
		"  PISYNC_NODE_ID=bob PISYNC_HUB_NKEY=<path of the seed> PISYNC_HUB_CA=<path of ca.pem>\n",
		"  PISYNC_HUB_URLS=tls://<this host, as its certificate names it>:17422\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("with TLS:\n%s\nwant %q", out.String(), want)
		}
	}
}

// TestHubNodesColumns: hub nodes keeps its columns in line past a long
// name, such as the 36 characters of a node id generated at a first start
// (before: a fixed width of 24, which such a name overran).
func TestHubNodesColumns(t *testing.T) {
	dir, _ := hubNodesEnv(t)
	for _, n := range []string{"ann", "94fd1a6d-bdc8-43ce-919f-388728c1483a"} {
		if err := addNodeCommand([]string{n, "--out", filepath.Join(dir, n+".nkey")}, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := nodesCommand(nil, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Index(lines[0], " team ") != strings.Index(lines[1], " team ") || strings.Index(lines[0], " U") != strings.Index(lines[1], " U") {
		t.Errorf("hub nodes out of line:\n%s", out.String())
	}
}

// TestHubNodesAndRemoveNodeWithoutHub: `hub nodes` lists the registrations;
// `hub remove-node` with no hub node running here removes the registration
// and says it takes effect when the hub starts, and refuses --erase (there
// is no one to erase through) only after the removal, which it reports;
// an unknown node is an error naming where it looked.
func TestHubNodesAndRemoveNodeWithoutHub(t *testing.T) {
	_, nodes := hubNodesEnv(t)
	var out bytes.Buffer
	if err := nodesCommand(nil, &out); err != nil || !strings.Contains(out.String(), "no workstation is registered") {
		t.Fatalf("hub nodes, none: %v\n%s", err, out.String())
	}
	for _, n := range []string{"ann", "bob", "eve"} {
		if _, err := embedded.AddNode(nodes, n, "t1"); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	if err := nodesCommand([]string{"--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var listed []embedded.Node
	if err := json.Unmarshal(out.Bytes(), &listed); err != nil || len(listed) != 3 || listed[2].Name != "eve" || listed[2].Team != "t1" {
		t.Fatalf("hub nodes --json: %s (%v)", out.Bytes(), err)
	}

	out.Reset()
	if err := removeNodeCommand([]string{"bob"}, &out); err != nil {
		t.Fatalf("hub remove-node bob: %v", err)
	}
	if !strings.Contains(out.String(), "removed node bob (team t1)") || !strings.Contains(out.String(), "reads the removal when it starts") {
		t.Errorf("hub remove-node bob, no hub running:\n%s", out.String())
	}
	out.Reset()
	// Refused before anything is removed (before: eve was removed, then
	// the command failed, and --json printed nothing to say so).
	err := removeNodeCommand([]string{"eve", "--erase", "--json"}, &out)
	if err == nil || !strings.Contains(err.Error(), "remove-node --erase needs the hub node running here") || !strings.Contains(err.Error(), "nothing was removed") {
		t.Errorf("hub remove-node eve --erase, no hub running: %v", err)
	}
	if regs, _ := embedded.LoadNodes(nodes); len(regs) != 2 {
		t.Errorf("after a refused remove-node --erase, %d nodes registered, want 2 (ann, eve)", len(regs))
	}
	if err := removeNodeCommand([]string{"eve"}, &out); err != nil {
		t.Fatalf("hub remove-node eve: %v", err)
	}
	if err := removeNodeCommand([]string{"zed"}, &out); err == nil || !strings.Contains(err.Error(), nodes) {
		t.Errorf("hub remove-node of a node not registered: %v", err)
	}
	out.Reset()
	if err := nodesCommand(nil, &out); err != nil || strings.Count(out.String(), "\n") != 1 || !strings.HasPrefix(out.String(), "ann ") {
		t.Errorf("hub nodes after removing bob and eve: %v\n%s", err, out.String())
	}
}

// TestHubReloadCommand: `hub reload` has the hub node running here read its
// nodes again (a node removed on another node of a cluster sharing the
// folder) and says whom it admits now; with no hub node here it says so.
func TestHubReloadCommand(t *testing.T) {
	h := startSecureHub(t)
	h.addNode("ann", "t1")
	h.addNode("bob", "t1")
	h.run()
	var out bytes.Buffer
	t.Setenv("PISYNC_HUB_STATE_DIR", t.TempDir())
	if err := reloadCommand(nil, &out); !errors.Is(err, errNoHubHere) {
		t.Errorf("hub reload with no hub node here: %v", err)
	}
	startHubControl(t, h.testHub)
	if _, err := embedded.RemoveNode(h.nodes, "bob"); err != nil {
		t.Fatal(err)
	}
	if err := reloadCommand(nil, &out); err != nil {
		t.Fatalf("hub reload: %v", err)
	}
	if !strings.Contains(out.String(), "admits 1 node(s) [ann]") {
		t.Errorf("hub reload:\n%s", out.String())
	}
	if got := h.srv.Nodes(); len(got) != 1 || got[0].Name != "ann" {
		t.Errorf("the hub admits %+v after the reload", got)
	}

	// --json says what was done: removed, reloaded, nothing to erase.
	t.Setenv("PISYNC_HUB_NODES_DIR", h.nodes)
	out.Reset()
	if err := removeNodeCommand([]string{"--json", "ann", "--erase"}, &out); err != nil {
		t.Fatalf("hub remove-node ann --erase --json: %v", err)
	}
	var removed removedNode
	if err := json.Unmarshal(out.Bytes(), &removed); err != nil || !removed.Reloaded || removed.Team != "t1" || len(removed.Erased) != 1 || removed.Erased[0].Found {
		t.Errorf("hub remove-node ann --erase --json: %s (%v)", out.Bytes(), err)
	}
	if got := h.srv.Nodes(); len(got) != 0 {
		t.Errorf("the hub admits %+v after ann's removal", got)
	}
}

// TestAddNodeReloadsTheHub: `hub add-node` with a hub node running here
// has it reload: the new node is admitted at once, with no SIGHUP.
func TestAddNodeReloadsTheHub(t *testing.T) {
	h := startSecureHub(t)
	h.addNode("ann", "t1")
	h.run()
	// The hub runs with TLS on another leaf port; this shell has neither
	// set: add-node tells the workstation the hub's (it told this shell's:
	// nats:// and 7422, and the key was refused).
	stop, err := hubControl(h.srv, &config.Hub{StateDir: h.dir, Replicas: 1, TLSCert: filepath.Join(h.certs, "hub.pem"), LeafListen: "0.0.0.0:17422"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	t.Setenv("PISYNC_HUB_STATE_DIR", h.dir)
	t.Setenv("PISYNC_HUB_NODES_DIR", h.nodes)
	t.Setenv("PISYNC_HUB_TLS_CERT", "")
	var out bytes.Buffer
	if err := addNodeCommand([]string{"bob", "--team", "t1", "--out", filepath.Join(t.TempDir(), "bob.nkey")}, &out); err != nil {
		t.Fatalf("hub add-node bob: %v", err)
	}
	for _, want := range []string{"the hub node running here reloaded and admits bob", "PISYNC_HUB_URLS=tls://<this host, as its certificate names it>:17422", "PISYNC_HUB_CA="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("hub add-node bob: no %q in\n%s", want, out.String())
		}
	}
	if got := h.srv.Nodes(); len(got) != 2 || got[1].Name != "bob" {
		t.Errorf("the hub admits %+v after add-node bob", got)
	}
}

// TestAddNodeBadName: a name no node id can be is refused before anything
// is made; "a/b" was said to be a seed file that could not be made (a
// probe), and with a folder "a" a seed file was made in it.
func TestAddNodeBadName(t *testing.T) {
	dir, nodes := hubNodesEnv(t)
	t.Chdir(dir)
	os.Mkdir("a", 0o700)
	for _, name := range []string{"a/b", "c/d", "../x", "bad name"} {
		err := addNodeCommand([]string{name}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "want 1 to 64 characters of [A-Za-z0-9_-]") {
			t.Errorf("add-node %q: %v", name, err)
		}
	}
	if ents, _ := os.ReadDir("a"); len(ents) != 0 {
		t.Errorf("a refused name left %v in folder a", ents)
	}
	if got, _ := embedded.LoadNodes(nodes); len(got) != 0 {
		t.Errorf("a refused name registered %v", got)
	}
}

// TestAddNodeExistingName: add-node on a name registered already replaced
// its key (cutting off the workstation running with it) and, with --team,
// moved it to another team, saying what a first registration says. Now it
// is refused and changes nothing; --replace does it and says that the old
// key is refused and that the node changed teams.
func TestAddNodeExistingName(t *testing.T) {
	dir, nodes := hubNodesEnv(t)
	var out bytes.Buffer
	if err := addNodeCommand([]string{"ann", "--team", "red", "--out", filepath.Join(dir, "ann.nkey")}, &out); err != nil {
		t.Fatal(err)
	}
	before, err := embedded.LoadNodes(nodes)
	if err != nil || len(before) != 1 {
		t.Fatalf("%v %v", before, err)
	}
	out.Reset()
	err = addNodeCommand([]string{"ann", "--team", "blue", "--out", filepath.Join(dir, "ann2.nkey")}, &out)
	if err == nil || !strings.Contains(err.Error(), "node ann is registered already (team red") || !strings.Contains(err.Error(), "--replace") {
		t.Errorf("add-node on a registered name: %v\n%s", err, out.String())
	}
	if after, _ := embedded.LoadNodes(nodes); len(after) != 1 || after[0] != before[0] {
		t.Errorf("a refused add-node changed the registration: %v, was %v", after, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "ann2.nkey")); err == nil {
		t.Error("a refused add-node left a seed file")
	}

	// Registered under another file name: replaced, not registered twice.
	if err := os.Rename(filepath.Join(nodes, "ann.json"), filepath.Join(nodes, "laptop.json")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := addNodeCommand([]string{"ann", "--team", "blue", "--replace", "--out", filepath.Join(dir, "ann3.nkey")}, &out); err != nil {
		t.Fatal(err)
	}
	after, err := embedded.LoadNodes(nodes)
	if err != nil || len(after) != 1 || after[0].Team != "blue" || after[0].Nkey == before[0].Nkey {
		t.Fatalf("add-node --replace: %v %v, was %v", after, err, before)
	}
	for _, want := range []string{"its old key " + before[0].Nkey + " is refused", "moved node ann from team red to team blue"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("add-node --replace does not say %q:\n%s", want, out.String())
		}
	}

	// A key replaced without --team (its seed leaked): the node stays in
	// its team. (It moved into the default team, and read its sessions.)
	out.Reset()
	if err := addNodeCommand([]string{"ann", "--replace", "--out", filepath.Join(dir, "ann4.nkey")}, &out); err != nil {
		t.Fatal(err)
	}
	again, err := embedded.LoadNodes(nodes)
	if err != nil || len(again) != 1 || again[0].Team != "blue" || again[0].Nkey == after[0].Nkey {
		t.Fatalf("add-node --replace without --team: %v %v, was %v", again, err, after)
	}
	if strings.Contains(out.String(), "moved node") {
		t.Errorf("add-node --replace without --team says the node moved:\n%s", out.String())
	}
}
