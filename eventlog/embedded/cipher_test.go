package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// storeHolds reports whether some file under dir holds marker.
func storeHolds(t *testing.T, dir string, marker []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, marker) {
			t.Logf("marker in %s", path)
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// writeMarker starts a server on dir with cipher, stores marker in a
// stream and a KV bucket (a stream and a consumer on disk), and stops.
func writeMarker(t *testing.T, dir, cipher string, marker []byte) {
	t.Helper()
	cfg := testConfig(t, dir)
	cfg.StoreCipher = cipher
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	ctx := testCtx(t)
	createStream(t, js, "SECRET")
	for range 3 {
		if _, err := js.Publish(ctx, "SECRET.a", marker); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "SECRET", jetstream.ConsumerConfig{Durable: "reader", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := cons.Fetch(1)
	if err != nil {
		t.Fatal(err)
	}
	for m := range msgs.Messages() {
		m.Ack()
	}
	nc.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// readBack starts a server on dir with cfg's cipher settings and
// returns the stream's first message, or Start's error.
func readBack(t *testing.T, cfg Config) ([]byte, error) {
	t.Helper()
	s, err := Start(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(testCtx(t), "SECRET")
	if err != nil {
		t.Fatalf("the stream is gone after a restart: %v", err)
	}
	m, err := st.GetMsg(testCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	return m.Data, nil
}

func newMarker(t *testing.T) []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return []byte("MARKER-" + hex.EncodeToString(b))
}

// TestStoreCipher: with a cipher the marker is in no byte of the state
// dir (and with none it is: the search works); the key is 0600, made at
// first use, never in the marker file; a restart with it reads the store.
func TestStoreCipher(t *testing.T) {
	for _, cipher := range []string{"off", StoreCipherChaChaPoly, StoreCipherAES} {
		t.Run(cipher, func(t *testing.T) {
			dir := t.TempDir()
			marker := newMarker(t)
			writeMarker(t, dir, cipher, marker)
			found := storeHolds(t, dir, marker)
			if cipher == "off" {
				if !found {
					t.Fatal("the marker is in no file of a plain store: the search is broken")
				}
				if _, err := os.Stat(filepath.Join(dir, StoreKeyFileName)); err == nil {
					t.Fatal("a store key was made with the cipher off")
				}
				return
			}
			if found {
				t.Fatal("the marker is in the state dir in clear")
			}
			keyPath := filepath.Join(dir, StoreKeyFileName)
			st, err := os.Stat(keyPath)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Fatalf("key file mode %v", st.Mode().Perm())
			}
			key, _ := os.ReadFile(keyPath)
			if storeHoldsExcept(t, dir, bytes.TrimSpace(key), keyPath) {
				t.Fatal("the store key is written somewhere besides its file")
			}
			cfg := testConfig(t, dir)
			cfg.StoreCipher = cipher
			got, err := readBack(t, cfg)
			if err != nil {
				t.Fatalf("restart with the key: %v", err)
			}
			if !bytes.Equal(got, marker) {
				t.Fatalf("read back %q", got)
			}
		})
	}
}

func storeHoldsExcept(t *testing.T, dir string, b []byte, except string) bool {
	t.Helper()
	found := false
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == except {
			return err
		}
		if c, _ := os.ReadFile(path); bytes.Contains(c, b) {
			t.Logf("found in %s", path)
			found = true
		}
		return nil
	})
	return found
}

// TestStoreCipherRefusals: every start that would leave an encrypted
// store unread (or a plain one half converted) fails, naming the cause,
// and leaves the store as it was: a start with the right settings then
// reads it.
func TestStoreCipherRefusals(t *testing.T) {
	encrypted := t.TempDir()
	marker := newMarker(t)
	writeMarker(t, encrypted, StoreCipherChaChaPoly, marker)
	keyPath := filepath.Join(encrypted, StoreKeyFileName)
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other-key")
	otherKey, _ := newStoreKey(other)

	plain := t.TempDir()
	writeMarker(t, plain, "", marker)

	cases := []struct {
		name, dir, cipher, keyFile string
		setup                      func()
		want                       []string
	}{
		{name: "cipher off", dir: encrypted, cipher: "off", want: []string{"encrypted at rest", "PISYNC_STORE_CIPHER=chachapoly", keyPath}},
		{name: "key missing", dir: encrypted, cipher: StoreCipherChaChaPoly, setup: func() { os.Remove(keyPath) }, want: []string{"key file " + keyPath + " is missing", "move " + filepath.Join(encrypted, "jetstream") + " aside"}},
		{name: "other key file", dir: encrypted, cipher: StoreCipherChaChaPoly, keyFile: other, want: []string{"the key in " + other + " is not the key"}},
		{name: "wrong key", dir: encrypted, cipher: StoreCipherChaChaPoly, setup: func() { os.WriteFile(keyPath, []byte(otherKey+"\n"), 0o600) }, want: []string{"is not the key the JetStream store"}},
		{name: "not a key", dir: encrypted, cipher: StoreCipherChaChaPoly, setup: func() { os.WriteFile(keyPath, []byte("hunter2\n"), 0o600) }, want: []string{"is not a store key"}},
		{name: "other cipher", dir: encrypted, cipher: StoreCipherAES, want: []string{"was encrypted with chachapoly", "PISYNC_STORE_CIPHER=chachapoly"}},
		{name: "wrong key, marker lost", dir: encrypted, cipher: StoreCipherChaChaPoly, setup: func() {
			os.Remove(filepath.Join(encrypted, storeMarkerName))
			os.WriteFile(keyPath, []byte(otherKey+"\n"), 0o600)
		}, want: []string{"opened 0 of the 1 encrypted streams", "wrong store key"}},
		{name: "plain store", dir: plain, cipher: StoreCipherAES, want: []string{"holds data in clear", "does not convert"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(keyPath, key, 0o600)
			if c.setup != nil {
				c.setup()
			}
			cfg := testConfig(t, c.dir)
			cfg.StoreCipher, cfg.StoreKeyFile = c.cipher, c.keyFile
			_, err := readBack(t, cfg)
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwants %q", err, w)
				}
			}
			if strings.Contains(err.Error(), strings.TrimSpace(string(key))) {
				t.Error("the error shows the key")
			}
		})
	}
	// Nothing above changed either store.
	os.WriteFile(keyPath, key, 0o600)
	for _, c := range []struct{ dir, cipher string }{{encrypted, StoreCipherChaChaPoly}, {plain, "off"}} {
		cfg := testConfig(t, c.dir)
		cfg.StoreCipher = c.cipher
		got, err := readBack(t, cfg)
		if err != nil || !bytes.Equal(got, marker) {
			t.Fatalf("%s after the refusals: %q, %v", c.cipher, got, err)
		}
	}
	if storeHolds(t, encrypted, marker) {
		t.Fatal("the encrypted store holds the marker in clear after the refusals")
	}
}

// TestStoreCipherHalfCreatedStream: a kill while nats-server created a
// stream leaves its directory with the stream's key and no config (and a
// kill while it deleted one, a "."-named directory): nats-server skips
// both, holding nothing, so the start goes on and reads the store, where
// it used to refuse as if the store key were wrong.
func TestStoreCipherHalfCreatedStream(t *testing.T) {
	dir := t.TempDir()
	marker := newMarker(t)
	writeMarker(t, dir, StoreCipherChaChaPoly, marker)
	streams := filepath.Join(dir, "jetstream", "$G", "streams")
	key, err := os.ReadFile(filepath.Join(streams, "SECRET", "meta.key"))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(streams, "SECRET", "meta.inf"))
	if err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string]map[string][]byte{
		"HALF":     {"meta.key": key},
		".DELETED": {"meta.key": key, "meta.inf": meta},
	} {
		if err := os.MkdirAll(filepath.Join(streams, name), 0o700); err != nil {
			t.Fatal(err)
		}
		for f, b := range files {
			if err := os.WriteFile(filepath.Join(streams, name, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := testConfig(t, dir)
	cfg.StoreCipher = StoreCipherChaChaPoly
	got, err := readBack(t, cfg)
	if err != nil {
		t.Fatalf("start with a half-created stream: %v", err)
	}
	if !bytes.Equal(got, marker) {
		t.Fatalf("read back %q", got)
	}
}

// TestStoreCipherNewStore: a store moved aside (as the refusals advise)
// starts again, encrypted, with the key already there.
func TestStoreCipherNewStore(t *testing.T) {
	dir := t.TempDir()
	marker := newMarker(t)
	writeMarker(t, dir, "", marker)
	if err := os.Rename(filepath.Join(dir, "jetstream"), filepath.Join(dir, "jetstream.plain")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "jetstream.plain"))
	writeMarker(t, dir, StoreCipherChaChaPoly, marker)
	if storeHolds(t, filepath.Join(dir, "jetstream"), marker) {
		t.Fatal("the new store holds the marker in clear")
	}
}

// TestNATSConvertsAtStart records what nats-server 2.15.3 does with a
// plain store started with a key, the ground for refusing it
// (storeKey): it encrypts every block at once, while it recovers the
// stream, with nothing read, so the clear bytes are gone from the files
// and the messages read back. It does so by rewriting each block file in
// place (filestore.go, convertToEncrypted: os.WriteFile), which a crash
// or a full disk can tear with the clear original gone.
func TestNATSConvertsAtStart(t *testing.T) {
	dir := t.TempDir()
	marker := newMarker(t)
	start := func(key string) (*server.Server, jetstream.JetStream) {
		ns, err := server.NewServer(&server.Options{ServerName: "probe", DontListen: true, NoSigs: true,
			JetStream: true, StoreDir: dir, JetStreamKey: key, JetStreamCipher: server.ChaCha})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("not ready")
		}
		nc, err := nats.Connect("", nats.InProcessServer(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return ns, js
	}
	stop := func(ns *server.Server) { ns.Shutdown(); ns.WaitForShutdown() }
	ns, js := start("")
	createStream(t, js, "SECRET")
	pad := make([]byte, 64<<10)
	for i := range 400 { // 25 MiB: four 8 MiB blocks
		if _, err := js.Publish(testCtx(t), fmt.Sprintf("SECRET.%d", i), append(append([]byte{}, marker...), pad...)); err != nil {
			t.Fatal(err)
		}
	}
	stop(ns)
	if !storeHolds(t, dir, marker) {
		t.Fatal("the plain store does not hold the marker: the search is broken")
	}
	ns, js = start(strings.Repeat("k", 44))
	st, err := js.Stream(testCtx(t), "SECRET")
	if err != nil || st.CachedInfo().State.Msgs != 400 {
		t.Fatalf("after a start with a key: %v", err)
	}
	stop(ns)
	if storeHolds(t, dir, marker) {
		t.Fatal("nats-server left clear blocks after a start with a key: storeKey's comment and SECURITY.md need updating")
	}
}
