package embedded

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func listenConfig(t *testing.T) Config {
	cfg := testConfig(t, t.TempDir())
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

func readCreds(t *testing.T, path string) clientContext {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cc clientContext
	if err := json.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	return cc
}

func TestListenerRequiresCredentials(t *testing.T) {
	s := startServer(t, listenConfig(t))
	if s.ClientURL() == "" || s.CredentialsFile() == "" {
		t.Fatalf("url %q creds %q, want both", s.ClientURL(), s.CredentialsFile())
	}
	cc := readCreds(t, s.CredentialsFile())
	if cc.URL != s.ClientURL() {
		t.Errorf("credentials url = %q, want %q", cc.URL, s.ClientURL())
	}

	// The daemon writes (in process); the listener reads.
	ijs, _ := jetstream.New(connect(t, s))
	createStream(t, ijs, "TCP")
	if _, err := ijs.Publish(testCtx(t), "TCP.a", []byte("x")); err != nil {
		t.Fatalf("publish in process: %v", err)
	}
	nc, err := nats.Connect(cc.URL, nats.UserInfo(cc.User, cc.Password), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect with credentials: %v", err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(testCtx(t), "TCP")
	if err != nil {
		t.Fatalf("stream info over the listener: %v", err)
	}
	if m, err := st.GetMsg(testCtx(t), 1); err != nil || string(m.Data) != "x" {
		t.Fatalf("read over the listener: %v %v", m, err)
	}

	if nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect without credentials succeeded")
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(cc.User, "wrong"), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect with a wrong password succeeded")
	}
	// The in-process user is limited to in-process connections.
	pub, _ := s.inProcessKey.PublicKey()
	if nc, err := nats.Connect(s.ClientURL(), nats.Nkey(pub, s.inProcessKey.Sign), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("in-process credentials worked over TCP")
	}
	// And in-process connections still work next to the listener.
	if !connect(t, s).IsConnected() {
		t.Fatal("in-process connection not connected")
	}
}

func TestCredentialsFileModeAndReuse(t *testing.T) {
	cfg := listenConfig(t)
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := s.CredentialsFile()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o600 {
		t.Errorf("credentials mode = %v, want 0600", m)
	}
	first := readCreds(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Loosen the mode to check that the restart tightens it again.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, cfg)
	second := readCreds(t, path)
	if second.User != first.User || second.Password != first.Password {
		t.Errorf("credentials changed across restart")
	}
	if second.URL != s.ClientURL() {
		t.Errorf("url not updated: %q, want %q", second.URL, s.ClientURL())
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("credentials mode after restart = %v, want 0600", st.Mode().Perm())
	}
	nc, err := nats.Connect(second.URL, nats.UserInfo(second.User, second.Password), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect with reused credentials: %v", err)
	}
	nc.Close()
}

func TestNonLoopbackListenRejected(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:4222", ":4222", "[::]:4222", "192.168.1.10:4222", "example.com:4222", "127.0.0.1", "127.0.0.1:99999"} {
		t.Run(addr, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Listen = addr
			if s, err := Start(context.Background(), cfg); err == nil {
				s.Close()
				t.Fatalf("Start with Listen %q succeeded", addr)
			}
		})
	}
}

func TestLoopbackAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		host string
		port int
	}{
		{"127.0.0.1:4222", "127.0.0.1", 4222},
		{"127.1.2.3:4222", "127.1.2.3", 4222},
		{"[::1]:4222", "::1", 4222},
		{"localhost:4222", "127.0.0.1", 4222},
		{"127.0.0.1:0", "127.0.0.1", -1},
	} {
		host, port, err := loopbackAddr(tc.in)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("loopbackAddr(%q) = %q, %d, %v; want %q, %d", tc.in, host, port, err, tc.host, tc.port)
		}
	}
}

// A listener that cannot bind makes the server call Fatalf; Start must
// return that error quickly instead of waiting out the ready timeout, and
// must not keep the lock.
func TestListenFailureFailsStart(t *testing.T) {
	first := startServer(t, listenConfig(t))
	cfg := listenConfig(t)
	cfg.Listen = strings.TrimPrefix(first.ClientURL(), "nats://")

	begin := time.Now()
	s, err := Start(context.Background(), cfg)
	if err == nil {
		s.Close()
		t.Fatal("Start on a port in use succeeded")
	}
	if !strings.Contains(err.Error(), "fatal") || time.Since(begin) > 5*time.Second {
		t.Errorf("err = %v after %s, want the fatal listen error at once", err, time.Since(begin))
	}
	cfg.Listen = "127.0.0.1:0"
	startServer(t, cfg) // lock released
}
