package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/projection"
)

// TestListenerIsReadOnly: a local subscriber on PISYNC_LISTEN, with the
// generated credentials and nats.go, against a running daemon: it reads
// PI_LOCAL (stream info, a consumer of its own, a direct get) and watches
// the pi_proj bucket; it cannot delete or purge a stream, delete or put a
// KV value, publish a line into pi.evt.>, create a stream or list the
// daemon's consumers. PI_LOCAL and pi_proj are intact afterwards. The log
// says where the listener is and where its credentials are. (Before, the
// listener's user was an administrator, and did all of that.)
func TestListenerIsReadOnly(t *testing.T) {
	cfg := stationConfig(t, "ws-l", "")
	cfg.HubURLs, cfg.Listen = nil, "127.0.0.1:0"
	s, log := loggedStationAt(t, cfg, slog.LevelInfo)
	d := s.d
	writeSession(t, s, "listen-session", 3)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := d.status(t.Context())
		return st.Stream.Messages == 4 && st.Projection.Applied >= 4, fmt.Sprintf("%+v %+v", st.Stream, st.Projection)
	})
	credsFile := filepath.Join(cfg.StateDir, "client-context.json")
	waitUntil(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(log.String(), "local subscriber listener up") && strings.Contains(log.String(), credsFile), log.String()
	})

	b, err := os.ReadFile(credsFile)
	if err != nil {
		t.Fatal(err)
	}
	var cc struct{ URL, User, Password string }
	if err := json.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cc.URL, nats.UserInfo(cc.User, cc.Password), nats.NoReconnect(),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	op := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		t.Cleanup(cancel)
		return c
	}

	// Reading works.
	local, err := js.Stream(op(), eventlog.LocalStream)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	before := local.CachedInfo().State
	cons, err := js.OrderedConsumer(op(), eventlog.LocalStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	batch, err := cons.Fetch(10, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range batch.Messages() {
		n++
	}
	if n != 4 {
		t.Fatalf("read %d lines of PI_LOCAL, want 4", n)
	}
	if _, err := local.GetLastMsgForSubject(op(), "pi.evt.ws-l.>"); err != nil {
		t.Errorf("direct get: %v", err)
	}
	kv, err := js.KeyValue(op(), projection.Bucket)
	if err != nil {
		t.Fatalf("pi_proj: %v", err)
	}
	w, err := kv.WatchAll(op())
	if err != nil {
		t.Fatalf("watch pi_proj: %v", err)
	}
	var key string
	for e := range w.Updates() {
		if e == nil {
			break // the initial values are all there
		}
		key = e.Key()
	}
	w.Stop()
	if key == "" {
		t.Fatal("no value in pi_proj")
	}
	value, err := kv.Get(op(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}

	// Changing anything is refused. A refused request gets no reply:
	// each waits out a short deadline.
	op = func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), time.Second)
		t.Cleanup(cancel)
		return c
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("the listener's user could %s", what)
		}
	}
	refused("delete PI_LOCAL", js.DeleteStream(op(), eventlog.LocalStream))
	refused("purge PI_LOCAL", local.Purge(op()))
	refused("delete a KV key", kv.Delete(op(), key))
	_, err = kv.Put(op(), key, []byte("forged"))
	refused("put a KV value", err)
	refused("delete pi_proj", js.DeleteKeyValue(op(), projection.Bucket))
	_, err = js.Publish(op(), "pi.evt.ws-l.listen-session", []byte(`{"type":"message","id":"forged"}`))
	refused("publish a line into PI_LOCAL", err)
	if err := nc.Publish("pi.evt.ws-l.forged", []byte(`{"type":"session","id":"forged"}`)); err == nil {
		nc.Flush()
	}
	_, err = js.CreateStream(op(), jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
	refused("create a stream", err)
	names := local.ConsumerNames(op())
	for range names.Name() {
	}
	refused("list the daemon's consumers", names.Err())

	// Where the daemon's consumer names travel, a reader sees nothing. A
	// subscription to everything is refused: it got the daemon's own
	// deliveries, whose reply subjects ($JS.ACK.PI_LOCAL.<consumer>...)
	// named its consumers, which CONSUMER.CREATE could then redirect.
	if _, err := nc.SubscribeSync(">"); err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), `Permissions Violation for Subscription to ">"`) {
		t.Errorf("subscribing to >: %v, want a permissions violation", err)
	}
	// One to every line gets the daemon's new lines, but not its
	// JetStream API requests, its replies or its deliveries.
	all, err := nc.SubscribeSync("pi.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	if _, err := d.nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	appendLine(t, filepath.Join(cfg.SessionsDir, "--sec--", "2026-11-30T00-00-00-000Z_listen-session.jsonl"), msgLine("live", "list-2", "seen live"))
	for {
		m, err := all.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("the new line never reached a subscriber: %v", err)
		}
		if strings.HasPrefix(m.Subject, "$JS.API.") || strings.HasPrefix(m.Subject, "_INBOX_ws-l.") || strings.HasPrefix(m.Reply, "$JS.ACK.") {
			t.Fatalf("a reader received %s (reply %s)", m.Subject, m.Reply)
		}
		if strings.HasPrefix(m.Subject, "pi.evt.ws-l.") {
			break
		}
	}
	all.Unsubscribe()
	before.Msgs++
	before.LastSeq++

	// Intact.
	ijs := d.log.JetStream()
	// The subscriber sees a publish as it travels, before an atomic batch
	// commits it: wait for the store to hold the line, then compare.
	var info jetstream.Stream
	waitUntil(t, 10*time.Second, func() (bool, string) {
		info, err = ijs.Stream(t.Context(), eventlog.LocalStream)
		return err == nil && info.CachedInfo().State.LastSeq >= before.LastSeq, fmt.Sprintf("PI_LOCAL: %v", err)
	})
	if st := info.CachedInfo().State; st.Msgs != before.Msgs || st.LastSeq != before.LastSeq || st.NumSubjects != 1 {
		t.Errorf("PI_LOCAL changed: %+v, was %+v", st, before)
	}
	ikv, err := ijs.KeyValue(t.Context(), projection.Bucket)
	if err != nil {
		t.Fatalf("pi_proj: %v", err)
	}
	// The projection itself may have rewritten the value since (the live
	// line above): what must not be is a deleted or a forged one.
	if e, err := ikv.Get(t.Context(), key); err != nil || string(e.Value()) == "forged" || e.Revision() < value.Revision() {
		t.Errorf("pi_proj %s deleted or forged: %v", key, err)
	}
	if _, err := ijs.Stream(t.Context(), "EVIL"); err == nil {
		t.Error("stream EVIL exists")
	}
}
