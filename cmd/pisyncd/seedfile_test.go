package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestAddNodeSeedFile: `hub add-node --out FILE` creates FILE new, 0600. A
// file planted there beforehand (0666, so its planter could read what we
// write) or a symbolic link planted there (to a file or to nowhere) is
// refused with a clear error, nothing is written through it, and the node
// is not registered.
func TestAddNodeSeedFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PISYNC_HUB_NAME", "h")
	t.Setenv("PISYNC_HUB_STATE_DIR", filepath.Join(dir, "state"))
	nodesDir := filepath.Join(dir, "state", "nodes")

	planted := filepath.Join(dir, "planted.nkey")
	if err := os.WriteFile(planted, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(planted, 0o666)
	elsewhere := filepath.Join(dir, "elsewhere")
	os.WriteFile(elsewhere, nil, 0o666)
	os.Chmod(elsewhere, 0o666)
	linkToFile, linkToNothing := filepath.Join(dir, "link.nkey"), filepath.Join(dir, "dangling.nkey")
	os.Symlink(elsewhere, linkToFile)
	os.Symlink(filepath.Join(dir, "stolen"), linkToNothing)

	for _, out := range []string{planted, linkToFile, linkToNothing} {
		err := addNodeCommand([]string{"ws1", "--out", out}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "exists") {
			t.Errorf("--out %s: %v, want a refusal saying it exists", filepath.Base(out), err)
		}
	}
	for _, p := range []string{planted, elsewhere} {
		if b, _ := os.ReadFile(p); len(b) != 0 {
			t.Errorf("the seed was written into %s", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "stolen")); err == nil {
		t.Error("the seed was written through a dangling link")
	}
	if nodes, _ := embedded.LoadNodes(nodesDir); len(nodes) != 0 {
		t.Errorf("a refused add-node registered %v", nodes)
	}

	good := filepath.Join(dir, "ws1.nkey")
	var stdout bytes.Buffer
	if err := addNodeCommand([]string{"ws1", "--out", good}, &stdout); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(good); err != nil {
		t.Fatal(err)
	} else if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v, want a regular 0600 file", st.Mode())
	}
	b, _ := os.ReadFile(good)
	kp, err := nkeys.FromSeed(bytes.TrimSpace(b))
	if err != nil {
		t.Fatalf("seed file holds no seed: %v", err)
	}
	pub, _ := kp.PublicKey()
	nodes, _ := embedded.LoadNodes(nodesDir)
	if len(nodes) != 1 || nodes[0].Nkey != pub {
		t.Fatalf("registered %v, want ws1 with the seed's key %s", nodes, pub)
	}
	// Running it again (the file exists now) is refused too, and keeps
	// the registration that matches the seed handed out.
	if err := addNodeCommand([]string{"ws1", "--out", good}, io.Discard); err == nil {
		t.Fatal("add-node overwrote an existing seed file")
	}
	if nodes, _ := embedded.LoadNodes(nodesDir); len(nodes) != 1 || nodes[0].Nkey != pub {
		t.Fatalf("a refused add-node changed the registration: %v", nodes)
	}
}

// TestDevInitSeedFilesPlanted: dev-init writes each secret to a temporary
// file and renames it into place, so a 0666 file or a link planted where a
// new node's seed goes is replaced, never written through.
func TestDevInitSeedFilesPlanted(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(elsewhere, nil, 0o666)
	os.Chmod(elsewhere, 0o666)
	os.Symlink(elsewhere, filepath.Join(dir, "ws1.nkey"))
	os.WriteFile(filepath.Join(dir, "ws2.nkey"), nil, 0o666)
	os.Chmod(filepath.Join(dir, "ws2.nkey"), 0o666)
	if err := devInitCommand([]string{dir, "--hosts=hub1", "--nodes=ws1,ws2"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(elsewhere); len(b) != 0 {
		t.Error("the seed was written through the planted link")
	}
	for _, f := range []string{"ws1.nkey", "ws2.nkey", "route.secret"} {
		if st, err := os.Lstat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		} else if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want a regular 0600 file", f, st.Mode())
		}
	}
}
