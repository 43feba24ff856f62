//go:build docker

package docker

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestSecure: the compose file as it is, a plain `docker-compose up`: the
// pki service fills the certs volume, every hub listener runs TLS and each
// workstation is authenticated by its registered nkey. A session crosses
// both ways, the hubs refuse nothing that should pass, and a connection
// without credentials is refused.
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
}
