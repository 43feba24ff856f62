package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubAsItsUserAfterRootRenews: the hub runs as a user of its own
// (the systemd unit's pisyncd-hub) and its TLS files are 0600. Files made
// by root stopped it with nats-server's bare "permission denied"; now it
// says whose they are and the fix. And `sudo pisyncd hub certs DIR
// --renew` left hub.pem and hub-key.pem root's, so the reload that was to
// serve them failed; the renewal now keeps each file's owner, and the
// hub, reloaded, serves the new certificate. So with `sudo pisyncd hub
// add-node` into the hub's state dir.
func TestHubAsItsUserAfterRootRenews(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the hub as another user (CI runs as root)")
	}
	base, err := os.MkdirTemp("", "hubowner") // the hub's user must enter it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	certs, state := filepath.Join(base, "certs"), filepath.Join(base, "state")
	var made bytes.Buffer
	if err := certsCommand([]string{certs, "--hosts", "localhost,127.0.0.1"}, &made); err != nil {
		t.Fatal(err)
	}
	// Made by root, they are root's, and it says which to give the hub.
	files := []string{"hub.pem", "hub-key.pem", "ca.pem", "route.secret"}
	for i, f := range files {
		files[i] = filepath.Join(certs, f)
	}
	if want := "chown pisyncd-hub " + strings.Join(files, " ") + " (not " + filepath.Join(certs, "ca-key.pem"); !strings.Contains(made.String(), want) {
		t.Errorf("hub certs as root does not say %q:\n%s", want, made.String())
	}
	for _, d := range []string{base, certs} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(state, testenv.Nobody, testenv.Nobody); err != nil {
		t.Fatal(err)
	}
	leaf := testenv.FreeAddr(t)
	hubEnv := []string{"PISYNC_HUB_NAME=hub-own",
		"PISYNC_HUB_STATE_DIR=" + state, "PISYNC_HUB_LEAF_LISTEN=" + leaf, "PISYNC_HUB_LISTEN=" + testenv.FreeAddr(t),
		"PISYNC_HUB_TLS_CERT=" + filepath.Join(certs, "hub.pem"), "PISYNC_HUB_TLS_KEY=" + filepath.Join(certs, "hub-key.pem"),
		"PISYNC_HUB_TLS_CA=" + filepath.Join(certs, "ca.pem")}
	start := func() (*daemonProc, *lockedWriter) {
		cmd := testenv.AsNobody(t, "hub")
		cmd.Env = append(append(cmd.Env, "PISYNC_TEST_AS_MAIN=1"), hubEnv...)
		p := startProc(t, cmd, nil)
		t.Cleanup(func() { p.kill(t, syscall.SIGTERM) })
		return p, p.stderr
	}

	// Made by root: refused at start, with whose the file is and the fix.
	p, out := start()
	select {
	case err := <-p.done:
		p.done <- err // for the clean-up's kill
	case <-time.After(30 * time.Second):
		t.Fatalf("the hub started with files it cannot read:\n%s", out.String())
	}
	for _, want := range []string{"the hub runs as nobody and cannot read " + filepath.Join(certs, "hub.pem"), "belongs to root with mode 0600", "chown nobody"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the refused start does not say %q:\n%s", want, out.String())
		}
	}

	// Given to the hub's user, as the error says: it runs.
	for _, f := range files {
		if err := os.Chown(f, testenv.Nobody, testenv.Nobody); err != nil {
			t.Fatal(err)
		}
	}
	p, out = start()
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the hub stopped: %v\n%s", err, out.String())
		default:
		}
		return strings.Contains(out.String(), "hub running"), "the hub running:\n" + out.String()
	})
	trust := testenv.TrustCA(t, filepath.Join(certs, "ca.pem"), "localhost")
	old := testenv.ServedCertSerial(t, leaf, trust)

	// A node registered by root into the hub's state dir: the nodes
	// folder and its file are the hub's, which reloads and admits it
	// (before, both were root's, 0700 and 0600, and the reload failed).
	for _, kv := range hubEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var said bytes.Buffer
	if err := addNodeCommand([]string{"laptop", "--out", filepath.Join(base, "laptop.nkey")}, &said); err != nil {
		t.Fatalf("add-node as root: %v\n%s", err, out.String())
	}
	if !strings.Contains(said.String(), "the hub node running here reloaded and admits laptop") {
		t.Errorf("add-node as root says:\n%s", said.String())
	}
	for _, p := range []string{filepath.Join(state, "nodes"), filepath.Join(state, "nodes", "laptop.json")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != testenv.Nobody {
			t.Errorf("%s is uid %d's, want the hub's user's", p, st.Uid)
		}
	}

	// Renewed by root, then reloaded: the hub still reads its files and
	// serves the new certificate.
	said.Reset()
	if err := certsCommand([]string{filepath.Clean(certs), "--renew"}, &said); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(said.String(), "these files are root's") {
		t.Errorf("a renewal that kept the hub's owner says they are root's:\n%s", said.String())
	}
	for _, n := range []string{"hub.pem", "hub-key.pem"} {
		fi, err := os.Stat(filepath.Join(certs, n))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != testenv.Nobody || st.Gid != testenv.Nobody || fi.Mode().Perm() != 0o600 {
			t.Errorf("renewed %s: uid %d gid %d mode %v, want the hub's user's, 0600", n, st.Uid, st.Gid, fi.Mode().Perm())
		}
	}
	renewed, err := embedded.ReadCert(filepath.Join(certs, "hub.pem"))
	if err != nil {
		t.Fatal(err)
	}
	reloads := strings.Count(out.String(), "reloaded registered nodes") // add-node's
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 30*time.Second, func() (bool, string) {
		if strings.Contains(out.String(), "reload failed") {
			t.Fatalf("the reload after a renewal by root failed:\n%s", out.String())
		}
		return strings.Count(out.String(), "reloaded registered nodes") > reloads, "the reload:\n" + out.String()
	})
	if got := testenv.ServedCertSerial(t, leaf, trust); got.Cmp(renewed.SerialNumber) != 0 || got.Cmp(old) == 0 {
		t.Fatalf("after the reload the hub serves serial %v, want the renewed %v (old %v)", got, renewed.SerialNumber, old)
	}
}
