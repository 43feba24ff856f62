package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

func listenConfig(t testing.TB) Config {
	cfg := testConfig(t, t.TempDir())
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

func readCreds(t testing.TB, path string) clientContext {
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

// connectReader connects over the listener as a local subscriber does,
// with the context file's url and nkey seed.
func connectReader(t testing.TB, s *Server) (*nats.Conn, error) {
	t.Helper()
	cc := readCreds(t, s.CredentialsFile())
	seed, err := nats.NkeyOptionFromSeed(cc.Nkey)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cc.URL, seed, nats.NoReconnect())
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// runRelay runs s's read relay until the test ends.
func runRelay(t testing.TB, s *Server) *ReadRelay {
	t.Helper()
	r, err := s.OpenReadRelay(slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("read relay: %v", err)
		}
		r.Close()
	})
	return r
}

// localStream makes PI_LOCAL as the daemon does, republishing for readers.
func localStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	if _, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{
		Name: "PI_LOCAL", Subjects: []string{"pi.evt.>"}, AllowDirect: true,
		RePublish: &jetstream.RePublish{Source: "pi.evt.>", Destination: "pi.live.evt.>"},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestListenerRequiresCredentials(t *testing.T) {
	s := startServer(t, listenConfig(t))
	if s.ClientURL() == "" || s.CredentialsFile() == "" {
		t.Fatalf("url %q creds %q, want both", s.ClientURL(), s.CredentialsFile())
	}
	cc := readCreds(t, s.CredentialsFile())
	if cc.URL != s.ClientURL() || cc.Nkey != filepath.Join(filepath.Dir(s.CredentialsFile()), seedFileName) {
		t.Errorf("credentials = %+v, want url %q and the seed beside", cc, s.ClientURL())
	}

	// The daemon writes (in process); the listener reads, live and stored.
	runRelay(t, s)
	ijs, _ := jetstream.New(connect(t, s))
	localStream(t, ijs)
	if _, err := ijs.Publish(testCtx(t), "pi.evt.n.a", []byte("x")); err != nil {
		t.Fatalf("publish in process: %v", err)
	}
	nc, err := connectReader(t, s)
	if err != nil {
		t.Fatalf("connect with credentials: %v", err)
	}
	live, err := nc.SubscribeSync("pi.evt.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := ijs.Publish(testCtx(t), "pi.evt.n.a", []byte("y")); err != nil {
		t.Fatal(err)
	}
	m, err := live.NextMsg(5 * time.Second)
	if err != nil || string(m.Data) != "y" || m.Subject != "pi.evt.n.a" || m.Header.Get("Nats-Sequence") != "2" || m.Header.Get("Nats-Stream") != "PI_LOCAL" {
		t.Fatalf("live: %+v %v, want y on pi.evt.n.a as PI_LOCAL 2", m, err)
	}
	m, err = nc.Request("$JS.API.DIRECT.GET.PI_LOCAL", []byte(`{"seq":1}`), 5*time.Second)
	if err != nil || string(m.Data) != "x" || m.Header.Get("Nats-Sequence") != "1" {
		t.Fatalf("direct get over the listener: %+v %v", m, err)
	}

	// The relay passes on what a direct get takes, and no more.
	for body, status := range map[string]string{
		`{"seq":1,"evil":true}`:    "400",
		`{"seq":1} {"seq":2}`:      "400",
		`not json`:                 "400",
		`{"seq":99}`:               "404",
		`{"last_by_subj":"x.>"}`:   "404",
		`{"seq":1,"batch":100000}`: "",
	} {
		m, err := nc.Request("$JS.API.DIRECT.GET.PI_LOCAL", []byte(body), 5*time.Second)
		if err != nil || m.Header.Get("Status") != status {
			t.Errorf("direct get %s: %v %v, want status %q", body, m.Header, err, status)
		}
	}
	if _, err := nc.Request("$JS.API.DIRECT.GET.KV_other", []byte(`{"seq":1}`), time.Second); err == nil {
		t.Error("a direct get of a stream readers do not read was answered")
	}

	if nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect without credentials succeeded")
	}
	other, _ := nkeys.CreateUser()
	opub, _ := other.PublicKey()
	if nc, err := nats.Connect(s.ClientURL(), nats.Nkey(opub, other.Sign), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect with another nkey succeeded")
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

// TestListenerSendsNoSecret: what a client sends to connect is good for
// that connect alone. A server that is not the daemon (another local user
// on the port while the daemon is down) gets a signature of its own
// nonce, which the daemon's server, with another nonce, refuses.
func TestListenerSendsNoSecret(t *testing.T) {
	s := startServer(t, listenConfig(t))
	cc := readCreds(t, s.CredentialsFile())
	kp, err := nkeys.FromSeed(mustRead(t, cc.Nkey))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	// What a squatter receives: the public key and a signature of the
	// nonce it chose.
	sig, _ := kp.Sign([]byte("squatter's nonce"))
	replay := func(nonce []byte) ([]byte, error) { return sig, nil }
	if nc, err := nats.Connect(s.ClientURL(), nats.Nkey(pub, replay), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("a replayed signature connected")
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.Nkey(pub, kp.Sign), nats.NoReconnect()); err != nil {
		t.Fatalf("the seed's own signature: %v", err)
	} else {
		nc.Close()
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

func TestCredentialsFileModeAndReuse(t *testing.T) {
	cfg := listenConfig(t)
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := s.CredentialsFile()
	seedPath := filepath.Join(cfg.StateDir, seedFileName)
	for _, p := range []string{path, seedPath} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s mode = %v, want 0600", p, m)
		}
	}
	first := mustRead(t, seedPath)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Loosen the modes to check that the restart tightens them again.
	for _, p := range []string{path, seedPath} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s = startServer(t, cfg)
	if !bytes.Equal(mustRead(t, seedPath), first) {
		t.Errorf("seed changed across restart")
	}
	if cc := readCreds(t, path); cc.URL != s.ClientURL() {
		t.Errorf("url not updated: %q, want %q", cc.URL, s.ClientURL())
	}
	for _, p := range []string{path, seedPath} {
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode after restart = %v, want 0600", p, st.Mode().Perm())
		}
	}
	if _, err := connectReader(t, s); err != nil {
		t.Fatalf("connect with reused credentials: %v", err)
	}
}

// TestOldPasswordCredentialsReplaced: a context file of an older release
// (a user and a password) is replaced by one with an nkey, and the
// password no longer connects.
func TestOldPasswordCredentialsReplaced(t *testing.T) {
	cfg := listenConfig(t)
	path := filepath.Join(cfg.StateDir, credsFileName)
	old := `{"description":"x","url":"nats://127.0.0.1:1","user":"local-abc","password":"secret"}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg)
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), "password") || !strings.Contains(string(b), seedFileName) {
		t.Fatalf("context file not replaced:\n%s", b)
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("local-abc", "secret"), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("the old password connected")
	}
	if _, err := connectReader(t, s); err != nil {
		t.Fatal(err)
	}
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
