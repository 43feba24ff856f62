package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// TestHubDevInit: the first run makes the CA, the hub certificate and a
// registration and seed per node; a second run keeps every file as it is
// (a compose restart must not change the keys the hubs and workstations
// hold); the named owner gets what workstations read.
func TestHubDevInit(t *testing.T) {
	dir := t.TempDir()
	args := []string{dir, "--hosts", "hub1,hub2", "--nodes=ws1, ws2"}
	if os.Geteuid() == 0 {
		args = append(args, "--owner=4321:4322")
	}
	var out bytes.Buffer
	if err := devInitCommand(args, &out); err != nil {
		t.Fatalf("dev-init: %v\n%s", err, out.String())
	}
	files := []string{"ca.pem", "ca-key.pem", "hub.pem", "hub-key.pem", "route.secret", "ws1.nkey", "ws2.nkey", "nodes/ws1.json", "nodes/ws2.json"}
	first := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("after the first run: %v", err)
		}
		first[f] = b
		if st, _ := os.Stat(filepath.Join(dir, f)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	nodes, err := embedded.LoadNodes(filepath.Join(dir, "nodes"))
	if err != nil || len(nodes) != 2 {
		t.Fatalf("registered nodes: %v, %v", nodes, err)
	}
	if os.Geteuid() == 0 {
		for _, f := range []string{"ca.pem", "ws1.nkey", "ws2.nkey"} {
			st, _ := os.Stat(filepath.Join(dir, f))
			if s := st.Sys().(*syscall.Stat_t); s.Uid != 4321 || s.Gid != 4322 {
				t.Errorf("%s owned by %d:%d, want 4321:4322", f, s.Uid, s.Gid)
			}
		}
	}

	out.Reset()
	if err := devInitCommand(args, &out); err != nil {
		t.Fatalf("second dev-init: %v", err)
	}
	for _, f := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(b, first[f]) {
			t.Errorf("%s changed on the second run", f)
		}
	}

	// A node added to the list later is registered; the others are kept.
	out.Reset()
	if err := devInitCommand([]string{dir, "--hosts=hub1", "--nodes=ws1,ws3"}, &out); err != nil {
		t.Fatalf("third dev-init: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ws1.nkey")); !bytes.Equal(b, first["ws1.nkey"]) {
		t.Error("ws1's seed changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "ws3.nkey")); err != nil {
		t.Errorf("ws3 not registered: %v", err)
	}

	for _, bad := range [][]string{
		{dir, "--hosts=hub1"},
		{dir, "--nodes=ws1"},
		{"--hosts=hub1", "--nodes=ws1"},
		{dir, "--hosts=hub1", "--nodes=ws1", "--owner=me"},
		{dir, "--hosts=hub1", "--nodes=../evil"},
	} {
		if err := devInitCommand(bad, &out); !errors.Is(err, errUsage) {
			t.Errorf("dev-init %q: %v, want a usage error", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil.nkey")); err == nil {
		t.Error("a node name wrote outside DIR")
	}
}

// TestHubDevInitKeepsCA: dev-init over a folder whose hub certificate was
// removed (to have it made again) made a new CA as well, which the
// workstations' ca.pem did not match. Now it keeps the CA and issues the
// hub certificate from it.
func TestHubDevInitKeepsCA(t *testing.T) {
	dir := t.TempDir()
	args := []string{dir, "--hosts", "hub1,hub2", "--nodes", "ws1"}
	var out bytes.Buffer
	if err := devInitCommand(args, &out); err != nil {
		t.Fatalf("dev-init: %v\n%s", err, out.String())
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	os.Remove(filepath.Join(dir, "hub.pem"))
	out.Reset()
	if err := devInitCommand(args, &out); err != nil {
		t.Fatalf("dev-init again: %v\n%s", err, out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(b, ca) {
		t.Errorf("dev-init replaced the CA:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "hub.pem")); err != nil {
		t.Errorf("no hub certificate: %v\n%s", err, out.String())
	}
}
