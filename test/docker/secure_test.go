//go:build docker

package docker

import (
	"strings"
	"testing"
	"time"
)

// TestSecure: the same stack with TLS on every hub listener and each
// workstation authenticated by its registered nkey (PISYNC_SECURE=1 in
// scripts/demo). A session crosses both ways, and the hubs refuse nothing
// that should pass.
func TestSecure(t *testing.T) {
	s := newStackEnv(t,
		"PISYNC_HUB_OPEN=false", "PISYNC_HUB_NODES_DIR=/certs/nodes",
		"PISYNC_HUB_TLS_CERT=/certs/hub.pem", "PISYNC_HUB_TLS_KEY=/certs/hub-key.pem", "PISYNC_HUB_TLS_CA=/certs/ca.pem",
		"PISYNC_HUB_SCHEME=tls", "PISYNC_HUB_CA=/certs/ca.pem",
		"PISYNC_WS1_NKEY=/certs/ws1.nkey", "PISYNC_WS2_NKEY=/certs/ws2.nkey",
		"PISYNC_HUB_CLIENT_LISTEN=127.0.0.1:4222",
	)
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
}
