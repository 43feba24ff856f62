package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestOperatorModeHub: a hub run in NATS operator mode (JWTs, as nsc makes
// them), each workstation holding a .creds file (PISYNC_HUB_CREDS) for a
// user of the team's account with the node permissions of docs/HUB.md.
// PI_HUB is created by an administration user of the account; a session
// then replicates both ways, and a user without the node's permissions
// cannot publish as another node.
func TestOperatorModeHub(t *testing.T) {
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opClaims := jwt.NewOperatorClaims(opPub)
	opClaims.Name = "pisyncd-test"
	if _, err := opClaims.Encode(op); err != nil {
		t.Fatal(err)
	}
	account := func(name string, js bool) (nkeys.KeyPair, string, string) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		c := jwt.NewAccountClaims(pub)
		c.Name = name
		if js {
			c.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := c.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		return kp, pub, tok
	}
	_, sysPub, sysJWT := account("SYS", false)
	teamKP, teamPub, teamJWT := account("pisyncd", true)
	creds := func(name string, perms func(*jwt.UserClaims)) string {
		u, _ := nkeys.CreateUser()
		pub, _ := u.PublicKey()
		seed, _ := u.Seed()
		c := jwt.NewUserClaims(pub)
		c.Name = name
		if perms != nil {
			perms(c)
		}
		tok, err := c.Encode(teamKP)
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.FormatUserConfig(tok, seed)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), name+".creds")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node := func(name string) string {
		return creds(name, func(c *jwt.UserClaims) {
			p := embedded.NodePermissions(name)
			c.Pub.Allow.Add(p.Publish...)
			c.Pub.Deny.Add(p.PublishDeny...)
			c.Sub.Allow.Add(p.Subscribe...)
		})
	}

	resolver := &server.MemAccResolver{}
	resolver.Store(sysPub, sysJWT)
	resolver.Store(teamPub, teamJWT)
	client, leaf := testenv.FreeAddr(t), testenv.FreeAddr(t)
	opts := &server.Options{
		ServerName: "hub-op", Host: "127.0.0.1", Port: portOf(t, client),
		JetStream: true, JetStreamDomain: "hub", StoreDir: t.TempDir(), SyncAlways: true,
		TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: resolver, SystemAccount: sysPub,
		MaxPayload: 1 << 20,
	}
	opts.LeafNode.Host, opts.LeafNode.Port = "127.0.0.1", portOf(t, leaf)
	runNatsServer(t, opts)

	admin, err := nats.Connect("nats://"+client, nats.UserCredentials(creds("admin", nil)))
	if err != nil {
		t.Fatalf("admin: %v", err)
	}
	defer admin.Close()
	createDocHubStream(t, admin)

	credsA, credsB := node("ws-a"), node("ws-b")
	cfgA := stationConfig(t, "ws-a", "nats://"+leaf)
	cfgA.HubCreds = credsA
	a := runStation(t, cfgA)
	cfgB := stationConfig(t, "ws-b", "nats://"+leaf)
	cfgB.HubCreds = credsB
	b := runStation(t, cfgB)
	p := writeSession(t, a, "jwt-session", 3)
	waitFile(t, b, "jwt-session", 4)
	appendLine(t, filepath.Join(b.cfg.SessionsDir, "--sec--", filepath.Base(p)), msgLine("from-b", "jwt--2", "written on B"))
	waitFile(t, a, "jwt-session", 5)

	// ws-a's credentials cannot publish as ws-b.
	nc, err := nats.Connect("nats://"+client, nats.UserCredentials(credsA))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	perr := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { perr <- err })
	nc.Publish("pi.up.ws-b.forged", []byte("x"))
	nc.Flush()
	select {
	case err := <-perr:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Fatalf("forged publish: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ws-a's credentials published on ws-b's subject without an error")
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
