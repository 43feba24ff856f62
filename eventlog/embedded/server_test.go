package embedded

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

func TestStartClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(context.Background(), testConfig(t, dir))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got, want := s.NATS().Name(), "pisyncd-test"; got != want {
		t.Errorf("server name = %q, want %q", got, want)
	}
	if s.ClientURL() != "" || s.CredentialsFile() != "" {
		t.Errorf("no listener configured, got url %q creds %q", s.ClientURL(), s.CredentialsFile())
	}
	if s.NATS().Addr() != nil {
		t.Errorf("server listens on %v without Listen", s.NATS().Addr())
	}
	st, err := os.Stat(filepath.Join(dir, "jetstream"))
	if err != nil {
		t.Fatalf("store dir: %v", err)
	}
	if m := st.Mode().Perm(); m != 0o700 {
		t.Errorf("store dir mode = %v, want 0700", m)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "lock")); strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want our pid %d", b, os.Getpid())
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Connect(); err == nil {
		t.Fatal("Connect after Close succeeded")
	}
}

func TestJetStreamSyncAlways(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	js, err := jetstream.New(connect(t, s))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	info, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
	if info.Domain != "pi-test" {
		t.Errorf("JetStream domain = %q, want pi-test", info.Domain)
	}
	if got := s.NATS().JetStreamConfig(); got == nil || !got.SyncAlways || got.MaxStore != 256<<20 || got.MaxMemory != 16<<20 {
		t.Errorf("JetStream config = %+v, want SyncAlways and the configured limits", got)
	}

	st := createStream(t, js, "EVT")
	payload := []byte(`{"type":"message","id":"a1"}`)
	ack, err := js.Publish(ctx, "EVT.x", payload)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if ack.Domain != "pi-test" || ack.Sequence != 1 {
		t.Errorf("ack = %+v, want domain pi-test seq 1", ack)
	}
	msg, err := st.GetMsg(ctx, ack.Sequence)
	if err != nil {
		t.Fatalf("GetMsg: %v", err)
	}
	if !bytes.Equal(msg.Data, payload) || msg.Subject != "EVT.x" {
		t.Errorf("read back %q on %q", msg.Data, msg.Subject)
	}
}

func TestSecondStartFailsWhileLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := Start(context.Background(), testConfig(t, dir))
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}

	begin := time.Now()
	second, err := Start(context.Background(), testConfig(t, dir))
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("second Start on a locked state dir succeeded")
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("second Start took %s to fail, want at once", d)
	}
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() {
		t.Errorf("error = %v, want InUseError with our pid", err)
	}
	want := "state dir " + dir + " is in use by another pisyncd (pid " + strconv.Itoa(os.Getpid()) + ")"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to contain %q", err, want)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	third, err := Start(context.Background(), testConfig(t, dir))
	if err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := third.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)

	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	createStream(t, js, "KEEP")
	for i := range 3 {
		if _, err := js.Publish(testCtx(t), "KEEP.s", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	nc.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, cfg)
	js, _ = jetstream.New(connect(t, s))
	st, err := js.Stream(testCtx(t), "KEEP")
	if err != nil {
		t.Fatalf("stream after restart: %v", err)
	}
	if n := st.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("messages after restart = %d, want 3", n)
	}
	msg, err := st.GetLastMsgForSubject(testCtx(t), "KEEP.s")
	if err != nil || string(msg.Data) != "2" {
		t.Fatalf("last message = %v, %v; want \"2\"", msg, err)
	}
}

func TestConfigRejected(t *testing.T) {
	dir := t.TempDir()
	for name, mutate := range map[string]func(*Config){
		"no state dir":   func(c *Config) { c.StateDir = "" },
		"no node":        func(c *Config) { c.NodeID = "" },
		"dotted node":    func(c *Config) { c.NodeID = "a.b" },
		"wildcard node":  func(c *Config) { c.NodeID = "a*" },
		"negative limit": func(c *Config) { c.MaxStore = -1 },
		"hub url scheme": func(c *Config) { c.HubURLs = []string{"http://hub:7422"} },
		"hub no host":    func(c *Config) { c.HubURLs = []string{"nats://"} },
		"creds, no hub":  func(c *Config) { c.HubCredsFile = "/x.creds" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(t, dir)
			mutate(&cfg)
			if s, err := Start(context.Background(), cfg); err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
		})
	}
}

func TestDefaultLimitsAreExplicit(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.MaxMemory, cfg.MaxStore = 0, 0
	s := startServer(t, cfg)
	got := s.NATS().JetStreamConfig()
	if got.MaxMemory != DefaultMaxMemory || got.MaxStore != DefaultMaxStore {
		t.Errorf("limits = %d/%d, want the defaults %d/%d", got.MaxMemory, got.MaxStore, DefaultMaxMemory, DefaultMaxStore)
	}
}

func TestStartCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if s, err := Start(ctx, testConfig(t, dir)); err == nil {
		s.Close()
		t.Fatal("Start with a cancelled context succeeded")
	}
	// The failed start must not keep the lock.
	startServer(t, testConfig(t, dir))
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := Start(context.Background(), testConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	createStream(t, js, "LEAK")
	if _, err := js.Publish(testCtx(t), "LEAK.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var now int
	waitFor(t, 5*time.Second, "goroutines to return to the baseline", func() bool {
		now = runtime.NumGoroutine()
		return now <= before
	})
}

func TestFatalAfterStartIsReported(t *testing.T) {
	s := startServer(t, testConfig(t, t.TempDir()))
	if s.Err() != nil {
		t.Fatalf("Err before any fatal: %v", s.Err())
	}
	// The server's own Fatalf path, as taken for e.g. a failed listener.
	s.NATS().Fatalf("simulated: %s", "disk gone")
	select {
	case <-s.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("Failed not closed after Fatalf")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "simulated: disk gone") {
		t.Errorf("Err = %v, want the fatal message", err)
	}
}

// TestAsyncErrorsLogged: what nats.go reports outside any call (here a
// subscriber that fell behind and lost messages) reaches the daemon's log,
// naming the subscription, instead of nats.go's own line on stderr.
func TestAsyncErrorsLogged(t *testing.T) {
	var logs testenv.LogBuffer
	cfg := testConfig(t, t.TempDir())
	cfg.Logger = logs.Logger()
	s := startServer(t, cfg)
	nc := connect(t, s)
	ch := make(chan *nats.Msg, 1) // room for one: the rest are dropped
	sub, err := nc.ChanSubscribe("slow.sub", ch)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	for range 3 {
		if err := nc.Publish("slow.sub", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the slow consumer logged", func() bool {
		return strings.Contains(logs.String(), "slow consumer")
	})
	if out := logs.String(); !strings.Contains(out, "subject=slow.sub") || !strings.Contains(out, "level=WARN") {
		t.Errorf("log does not name the subscription at warn level:\n%s", out)
	}
}

// TestStateDirMadePrivate: a state dir made before pisyncd, open to other
// users, is made 0700 before anything is created in it. Left open, the
// control socket (bound under the process's umask, then chmod'ed 0600)
// let another user connect in between: under a umask of 000 a loop of
// connects by another account reached it at the daemon's first restart and
// read the web view's token.
func TestStateDirMadePrivate(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o755, 0o710} {
		dir := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		s := startServer(t, testConfig(t, dir))
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o700 {
			t.Errorf("state dir made %v before: mode %v after start, want 0700", mode, m)
		}
		s.Close()
	}
}

// TestStateDirPlantedFileRefused: while a state dir was open, another user
// could put a web-token of their own in it (an audit did, and read every
// session through the view with it): a start that closes the folder and
// finds a file of another user in it refuses, naming it.
func TestStateDirPlantedFileRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a file of another user needs root to make")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	planted := filepath.Join(dir, "web-token")
	if err := os.WriteFile(planted, []byte("0000000000000000000000000000000000000000000000000000000000000007\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s, err := Start(context.Background(), testConfig(t, dir))
	if err == nil {
		s.Close()
		t.Fatal("started over a state dir holding another user's web-token")
	}
	if !strings.Contains(err.Error(), "web-token (uid 65534)") {
		t.Errorf("the refusal does not name the file: %v", err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("state dir left %v", st.Mode().Perm())
	}
	// The folder closed, a start still refuses; removed, the next goes on.
	if s, err := Start(context.Background(), testConfig(t, dir)); err == nil {
		s.Close()
		t.Fatal("a second start took the planted web-token")
	}
	os.Remove(planted)
	startServer(t, testConfig(t, dir))
}

// TestStateDirNotOursLeftAlone: a state dir that is not pisyncd's to close
// is refused with its mode as it was. A shared folder (sticky, like /tmp;
// a probe's PISYNC_STATE_DIR pointed at one, and a refused start left it
// 0700, shutting its other users out), and a folder open to others that
// holds what pisyncd did not make (a home folder was made 0700). One that
// an earlier pisyncd left open is still closed.
func TestStateDirNotOursLeftAlone(t *testing.T) {
	for _, c := range []struct {
		name string
		mode os.FileMode
		file string
		want string // in the refusal; "" starts
	}{
		{"shared", 0o777 | os.ModeSticky, "", "sticky, like /tmp"},
		{"shared with a file", 0o777 | os.ModeSticky, "notes.txt", "sticky, like /tmp"},
		{"someone's folder", 0o755, "notes.txt", "holds what pisyncd did not make (notes.txt)"},
		{"an earlier pisyncd's", 0o755, "lock", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if c.file != "" {
				if err := os.WriteFile(filepath.Join(dir, c.file), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, c.mode); err != nil {
				t.Fatal(err)
			}
			s, err := Start(context.Background(), testConfig(t, dir))
			st, _ := os.Stat(dir)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
				s.Close()
				if st.Mode().Perm() != 0o700 {
					t.Errorf("mode %v after start, want 0700", st.Mode())
				}
			case err == nil:
				s.Close()
				t.Fatalf("started in a folder of mode %v holding %q", c.mode, c.file)
			default:
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "PISYNC_STATE_DIR") {
					t.Errorf("the refusal does not say why and what to do: %v", err)
				}
				if st.Mode() != c.mode|os.ModeDir {
					t.Errorf("mode %v after a refused start, was %v", st.Mode(), c.mode|os.ModeDir)
				}
			}
		})
	}
}
