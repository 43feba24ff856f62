package embedded

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestUnfinishedStreamSetAside: a stream whose creation a kill cut short
// (its config or the config's checksum never written) is set aside at the
// next start, which then creates it again and stores in it, in a plain
// store and an encrypted one. Without it the encrypted store's start was
// refused (no checksum: nats-server skips the stream) or creating the
// stream again failed ("corrupt state file").
func TestUnfinishedStreamSetAside(t *testing.T) {
	for _, cipher := range []string{"", StoreCipherChaChaPoly} {
		for _, lost := range []string{"meta.sum", "meta.inf"} {
			t.Run(cipher+"/"+lost, func(t *testing.T) {
				ctx := context.Background()
				state := t.TempDir()
				cfg := jetstream.StreamConfig{Name: "X", Subjects: []string{"x.>"}}
				use := func() {
					t.Helper()
					c := testConfig(t, state)
					c.StoreCipher = cipher
					s := startServer(t, c)
					defer s.Close() // the next use opens the same state dir
					js, err := jetstream.New(connect(t, s))
					if err != nil {
						t.Fatal(err)
					}
					if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
						t.Fatal(err)
					}
					if _, err := js.Publish(ctx, "x.a", []byte("line")); err != nil {
						t.Fatal(err)
					}
				}
				use()
				// What a kill during the creation leaves: the same
				// directory without the file written last (or the
				// one before it). Its message goes with it here; in
				// a real cut-short creation there is none.
				dirs, err := filepath.Glob(filepath.Join(state, "jetstream", "*", "streams", "X"))
				if err != nil || len(dirs) != 1 {
					t.Fatalf("stream dir: %v %v", dirs, err)
				}
				if err := os.Remove(filepath.Join(dirs[0], lost)); err != nil {
					t.Fatal(err)
				}
				if lost == "meta.inf" {
					os.Remove(filepath.Join(dirs[0], "meta.sum"))
				}
				use()
				aside, err := os.ReadDir(filepath.Join(state, unfinishedDir))
				if err != nil || len(aside) != 1 {
					t.Fatalf("set aside: %v %v", aside, err)
				}
			})
		}
	}
}
