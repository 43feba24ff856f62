//go:build docker

package docker

import (
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestSecure: the compose file as it is, a plain `docker-compose up`: the
// pki service fills the certs volume, every hub listener runs TLS and each
// workstation is authenticated by its registered nkey. A session crosses
// both ways, the hubs refuse nothing that should pass, and a connection
// without credentials is refused. The hub certificate renewed and every
// hub reloaded, each presents the new one; ws2 removed, ws1 links again
// (with the new certificate) and goes on.
func TestSecure(t *testing.T) {
	// The client listener on the private network, so that a client
	// without credentials can try it.
	s := newStackEnv(t, "PISYNC_HUB_CLIENT_LISTEN=0.0.0.0:4222")
	for _, h := range hubs {
		if !strings.Contains(s.logs(h), "tls=true") {
			t.Fatalf("%s does not run with TLS", h)
		}
	}
	l := newLedger()
	sid := "01995ec0-0000-7000-8000-000000000001"
	p1 := sessionPath(s.sessions("ws1"), "/work/sec", sid)
	p2 := sessionPath(s.sessions("ws2"), "/work/sec", sid)
	l.append(t, "ws1", sid, p1, hdrLine(sid, "/work/sec"), msgLine("e1", "", "over TLS"))
	waitFile(t, p2, 2, time.Minute)
	l.append(t, "ws2", sid, p2, msgLine("e2", "e1", "and back"))
	waitFor(t, time.Minute, func() (bool, string) { return l.check(s) })
	waitFor(t, 30*time.Second, func() (bool, string) { return l.checkPublishedOnce(s) })
	for _, h := range hubs {
		if lg := s.logs(h); strings.Contains(lg, "Authorization Violation") || strings.Contains(lg, "authentication error") {
			t.Errorf("%s refused a connection:\n%s", h, lg)
		}
	}

	// Without credentials (the certificate not even checked, so that
	// only authentication can refuse): refused. Plain text: refused.
	url := "tls://" + s.ip("hub1") + ":4222"
	nc, err := nats.Connect(url, nats.Secure(&tls.Config{InsecureSkipVerify: true}), nats.Timeout(5*time.Second), nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatalf("%s accepted a client without credentials", url)
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("client without credentials: %v, want an authorization error", err)
	}
	if nc, err := nats.Connect("nats://"+s.ip("hub1")+":4222", nats.Timeout(5*time.Second), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a plain-text client was accepted")
	}

	// The operator renews the hubs' certificate from the same CA (`hub
	// certs --renew` where the CA is, the pki service's volume) and
	// reloads every hub: each presents the new one from then on, without
	// a restart. (ws1 is made to link again below, with it.)
	leaf := func(h string) string { return s.ip(h) + ":7422" }
	insecure := &tls.Config{InsecureSkipVerify: true} // the serial is all that is read
	old := testenv.ServedCertSerial(t, leaf("hub1"), insecure)
	out := s.compose(time.Minute, "run", "--rm", "--no-deps", "pki", "hub", "certs", "/certs", "--renew")
	if !strings.Contains(out, "new hub certificate for [hub1 hub2 hub3]") {
		t.Fatalf("hub certs --renew: %s", out)
	}
	for _, h := range hubs {
		if out := s.docker(30*time.Second, "exec", s.id(h), "/pisyncd", "hub", "reload"); !strings.Contains(out, "admits 2 node(s)") {
			t.Fatalf("%s: hub reload: %s", h, out)
		}
		if got := testenv.ServedCertSerial(t, leaf(h), insecure); got.Cmp(old) == 0 {
			t.Fatalf("%s presents the certificate it had before the renewal and the reload (serial %v)", h, got)
		}
	}

	// The operator takes ws2 away: its registration removed from the
	// nodes folder the hubs share (they mount it read-only: the pki
	// service has it writable), then `hub reload` on every hub, which
	// closes ws2's link wherever it is. ws2 stays out; ws1 goes on.
	out = s.compose(time.Minute, "run", "--rm", "--no-deps", "-e", "PISYNC_HUB_NODES_DIR=/certs/nodes", "-e", "PISYNC_HUB_STATE_DIR=/certs",
		"pki", "hub", "remove-node", "ws2")
	if !strings.Contains(out, "removed node ws2") {
		t.Fatalf("hub remove-node ws2: %s", out)
	}
	for _, h := range hubs {
		if out := s.docker(30*time.Second, "exec", s.id(h), "/pisyncd", "hub", "reload"); !strings.Contains(out, "admits 1 node(s) [ws1]") {
			t.Fatalf("%s: hub reload: %s", h, out)
		}
	}
	waitFor(t, time.Minute, func() (bool, string) {
		st, err := s.status("ws2")
		return err == nil && st.HubLinked != nil && !*st.HubLinked, fmt.Sprintf("ws2's link after its removal: %+v, %v", st.HubLinked, err)
	})
	before, err := s.status("ws1")
	if err != nil || before.Forwarder == nil {
		t.Fatalf("ws1: %+v, %v", before, err)
	}
	sid2 := "01995ec0-0000-7000-8000-000000000002"
	l.append(t, "ws1", sid2, sessionPath(s.sessions("ws1"), "/work/sec", sid2), hdrLine(sid2, "/work/sec"), msgLine("f1", "", "after ws2 went"))
	waitFor(t, time.Minute, func() (bool, string) {
		st, err := s.status("ws1")
		return err == nil && st.Forwarder != nil && st.Forwarder.Forwarded >= before.Forwarder.Forwarded+2 && st.HubLinked != nil && *st.HubLinked,
			fmt.Sprintf("ws1 after ws2's removal: %+v, %v", st, err)
	})
	// ws2 tries again, and is refused.
	waitFor(t, time.Minute, func() (bool, string) {
		for _, h := range hubs {
			if lg := s.logs(h); strings.Contains(lg, "Authorization Violation") || strings.Contains(lg, "authentication error") {
				return true, ""
			}
		}
		return false, "no hub refused ws2's reconnection"
	})
	if st, err := s.status("ws2"); err != nil || st.HubLinked == nil || *st.HubLinked {
		t.Fatalf("ws2 linked again after its removal: %+v, %v", st.HubLinked, err)
	}
}
