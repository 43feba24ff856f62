package embedded

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// fakeHub accepts one leaf connection on loopback, sends an INFO that does
// not ask for TLS (what a man in the middle stripping tls_required sends)
// and returns the first bytes the leaf answers with.
func fakeHub(t *testing.T) (addr string, first <-chan []byte) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan []byte, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte(`INFO {"server_id":"NFAKE","server_name":"fake","version":"2.15.3","proto":1,"max_payload":1048576,"nonce":"bm9uY2Vub25jZQ","client_id":7,"leafnode_urls":["127.0.0.1:1"],"compression":"off"}` + "\r\n"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 512)
		n, _ := bufio.NewReader(c).Read(b)
		ch <- b[:n]
	}()
	return l.Addr().String(), ch
}

func nodeSeed(t *testing.T) []byte {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	return seed
}

// TestLeafInsistsOnTLS: against a "hub" whose INFO does not ask for TLS, a
// tls:// hub URL still starts a TLS handshake (its first byte is a TLS
// record) and no CONNECT, and so no signature with the node's key, ever
// crosses in plain text. The plain nats:// control run shows that the fake
// hub does get a CONNECT when TLS is not insisted on.
func TestLeafInsistsOnTLS(t *testing.T) {
	ca := t.TempDir()
	if err := GenerateDevCerts(ca, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scheme, ca string
	}{{"nats", ""}, {"tls", ""}, {"tls", filepath.Join(ca, "ca.pem")}, {"nats", filepath.Join(ca, "ca.pem")}} {
		t.Run(tc.scheme+"/ca="+tc.ca, func(t *testing.T) {
			addr, first := fakeHub(t)
			cfg := testConfig(t, t.TempDir())
			cfg.HubURLs = []string{tc.scheme + "://" + addr}
			cfg.HubNkeySeed, cfg.HubCAFile = nodeSeed(t), tc.ca
			startServer(t, cfg)
			var got []byte
			select {
			case got = <-first:
			case <-time.After(20 * time.Second):
				t.Fatal("the leaf never answered the fake hub")
			}
			plain := tc.scheme == "nats" && tc.ca == ""
			switch {
			case plain && (!strings.HasPrefix(string(got), "CONNECT") || !strings.Contains(string(got), `"sig"`)):
				t.Fatalf("control run: first bytes %q, want a signed CONNECT", got)
			case !plain && strings.Contains(string(got), "CONNECT"):
				t.Fatalf("a CONNECT crossed in plain text: %q", got)
			case !plain && (len(got) == 0 || got[0] != 0x16):
				t.Fatalf("first bytes %q, want a TLS handshake record (0x16)", got)
			}
		})
	}
}

// TestPlainCredentialsRefused: a node key with a nats:// URL to another
// machine does not start (nothing is dialled); HubInsecure starts it, with
// the warning in the log.
func TestPlainCredentialsRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.HubURLs = []string{"nats://user:s3cret@192.0.2.1:7422"}
	s, err := Start(context.Background(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("started with credentials over a plain URL to another host")
	}
	if !strings.Contains(err.Error(), "plain text") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error %q: want 'plain text', without the password", err)
	}
	cfg.HubURLs, cfg.HubNkeySeed = []string{"nats://192.0.2.1:7422"}, nodeSeed(t)
	if s, err := Start(context.Background(), cfg); err == nil {
		s.Close()
		t.Fatal("started with an nkey over a plain URL to another host")
	}
	var log testenv.LogBuffer
	cfg.Logger = log.Logger()
	cfg.HubInsecure = true
	startServer(t, cfg)
	if !strings.Contains(log.String(), "INSECURE") || !strings.Contains(log.String(), "192.0.2.1") {
		t.Fatalf("no warning in the log:\n%s", log.String())
	}
}

// TestHubOutageLoggedNowAndThen: a workstation that cannot reach its hub,
// whether it lost it (a reconnect) or never reached it (a connect), logs
// the first failed attempt and every connectErrorReports-th as an error,
// the others at debug. The server's defaults logged every failed
// reconnect: an error every second or two for as long as a laptop was
// offline.
func TestHubOutageLoggedNowAndThen(t *testing.T) {
	const upTo = 2*connectErrorReports + 5
	failed := regexp.MustCompile(`level=(\w+) msg="Error trying to connect as leafnode to remote server .*?\(attempt (\d+)\)`)
	run := func(t *testing.T, hubURL string, before func(*testenv.LogBuffer)) {
		var log testenv.LogBuffer
		cfg := testConfig(t, t.TempDir())
		cfg.Logger, cfg.HubURLs, cfg.LeafReconnect = log.Logger(), []string{hubURL}, time.Millisecond
		startServer(t, cfg)
		before(&log)
		waitFor(t, 30*time.Second, fmt.Sprintf("attempt %d", upTo), func() bool {
			return strings.Contains(log.String(), fmt.Sprintf("(attempt %d)", upTo))
		})
		var logged []int
		seen := 0
		for _, m := range failed.FindAllStringSubmatch(log.String(), -1) {
			n, _ := strconv.Atoi(m[2])
			if n > upTo {
				continue
			}
			seen++
			if m[1] == "ERROR" {
				logged = append(logged, n)
			} else if m[1] != "DEBUG" {
				t.Errorf("attempt %d logged at %s", n, m[1])
			}
		}
		if want := []int{1, connectErrorReports, 2 * connectErrorReports}; !slices.Equal(logged, want) || seen != upTo {
			t.Errorf("of %d failed attempts, logged as errors: %v; want %v of %d", seen, logged, want, upTo)
		}
	}
	t.Run("lost", func(t *testing.T) {
		leaf := testenv.FreeAddr(t)
		hub := startHub(t, HubConfig{StateDir: t.TempDir(), Name: "h", LeafListen: leaf})
		run(t, "nats://"+leaf, func(log *testenv.LogBuffer) {
			waitFor(t, 10*time.Second, "the leaf connection", func() bool {
				return strings.Contains(log.String(), "Leafnode connection created")
			})
			hub.Close()
		})
	})
	t.Run("never reached", func(t *testing.T) {
		run(t, "nats://"+testenv.FreeAddr(t), func(*testenv.LogBuffer) {})
	})
}
