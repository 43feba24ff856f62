package eventlog_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/jstest"
)

// TestEnsureStreamLeavesSettledStream: opening the log, PI_ALL and the
// state bucket again (every start does) leaves each stream that already
// has its settings as it is. An update
// rewrites the meta file and then its checksum file; in an encrypted store
// the meta file's bytes change at every write, and a kill -9 between the
// two writes left a stream the server would not open
// (TestSIGKILLExactlyOnceStoreCipher). The meta files' bytes, unchanged
// across the second open, show no write happened.
func TestEnsureStreamLeavesSettledStream(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	first := openLogWith(t, embedded.Config{StateDir: state, NodeID: "n1", StoreCipher: "chachapoly"})
	open := func() {
		t.Helper()
		lg, err := eventlog.OpenLocal(ctx, first.JetStream().Conn(), "n1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eventlog.OpenAll(ctx, lg.JetStream()); err != nil {
			t.Fatal(err)
		}
		if _, err := eventlog.OpenState(ctx, lg.JetStream()); err != nil {
			t.Fatal(err)
		}
	}
	metas := func() map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		for _, stream := range []string{eventlog.LocalStream, eventlog.AllStream, "KV_" + eventlog.StateBucket} {
			files, err := filepath.Glob(filepath.Join(state, "jetstream", "*", "streams", stream, "meta.inf"))
			if err != nil || len(files) != 1 {
				t.Fatalf("meta file of %s: %v %v", stream, files, err)
			}
			if out[stream], err = os.ReadFile(files[0]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	open()
	before := metas()
	open()
	for stream, after := range metas() {
		if !bytes.Equal(before[stream], after) {
			t.Errorf("opening the log again rewrote %s's meta file", stream)
		}
	}
}

// TestSetLive: PI_LOCAL and PI_ALL republish for the local
// listener's readers when asked to, and stop when asked to; their other
// settings stay as they are (a limit set by hand), and a stream that
// already has the setting is not updated (its meta file keeps its bytes).
func TestSetLive(t *testing.T) {
	ctx := context.Background()
	state := t.TempDir()
	_, js := jstest.Start(t, embedded.Config{StateDir: state})
	for _, cfg := range []jetstream.StreamConfig{eventlog.LocalStreamConfig(), eventlog.AllStreamConfig()} {
		cfg.MaxBytes = 1 << 30
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	check := func(name, dest string) {
		t.Helper()
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if rp := cfg.RePublish; (rp == nil) != (dest == "") || (rp != nil && rp.Destination != dest) || cfg.MaxBytes != 1<<30 {
			t.Errorf("%s republishes %+v (max bytes %d), want on %q", name, rp, cfg.MaxBytes, dest)
		}
	}
	meta := func(name string) []byte {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(state, "jetstream", "*", "streams", name, "meta.inf"))
		if len(files) != 1 {
			t.Fatalf("meta file of %s: %v", name, files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, dest := range map[string]string{eventlog.LocalStream: "pi.live.evt.>", eventlog.AllStream: "pi.live.all.>"} {
		check(name, "")
		for range 2 {
			if err := eventlog.SetLive(ctx, js, name, true); err != nil {
				t.Fatal(err)
			}
			check(name, dest)
		}
		before := meta(name)
		if err := eventlog.SetLive(ctx, js, name, true); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(meta(name), before) {
			t.Errorf("%s updated although it republished already", name)
		}
		if err := eventlog.SetLive(ctx, js, name, false); err != nil {
			t.Fatal(err)
		}
		check(name, "")
	}
}
