package main

import (
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

// readerConn connects over the local listener as a subscriber does: the
// url and the nkey seed named in the context file the daemon wrote.
func readerConn(t *testing.T, credsFile string, opts ...nats.Option) (*nats.Conn, error) {
	t.Helper()
	b, err := os.ReadFile(credsFile)
	if err != nil {
		t.Fatal(err)
	}
	var cc struct{ URL, Nkey string }
	if err := json.Unmarshal(b, &cc); err != nil {
		t.Fatal(err)
	}
	seed, err := nats.NkeyOptionFromSeed(cc.Nkey)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cc.URL, append([]nats.Option{seed, nats.NoReconnect()}, opts...)...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// directBatch reads up to 100 messages of stream from seq on subjects
// filter by one batched direct get, as a reader catches up.
func directBatch(t *testing.T, nc *nats.Conn, stream string, seq uint64, filter string) []*nats.Msg {
	t.Helper()
	sub, err := nc.SubscribeSync(nc.NewRespInbox())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	req := fmt.Sprintf(`{"seq":%d,"batch":100,"next_by_subj":%q}`, seq, filter)
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, sub.Subject, []byte(req)); err != nil {
		t.Fatal(err)
	}
	var got []*nats.Msg
	for {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("direct get %s from %d: %v", stream, seq, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			return got // 204: end of the batch; 404: nothing there
		}
		got = append(got, m)
	}
}

// TestListenerIsReadOnly: a local subscriber on PISYNC_LISTEN, with the
// generated nkey and nats.go, against a running daemon. It reads PI_LOCAL
// and pi_proj live (each stored message with its stream sequence) and
// stored (batched and single direct gets). Then, as an attacker holding the
// same credential, it tries what the daemon's own account would allow: the
// JetStream API (a push consumer delivering into pi.evt.>, a durable one,
// deleting and purging, creating a stream), publishing a line or a KV
// value, a direct get whose reply subject is a stream's, subscribing to
// everything, and more connections than the account's limit. Each is
// refused, PI_LOCAL and pi_proj are intact, and a new line still reaches
// the reader live. (Before, the reader had the daemon's account with
// permissions, and a push consumer wrote through them.)
func TestListenerIsReadOnly(t *testing.T) {
	cfg := stationConfig(t, "ws-l", "")
	cfg.HubURLs, cfg.Listen = nil, "127.0.0.1:0"
	s, log := loggedStationAt(t, cfg, slog.LevelInfo)
	d := s.d
	path := writeSession(t, s, "listen-session", 3)
	waitUntil(t, 20*time.Second, func() (bool, string) {
		st, _ := d.status(t.Context())
		return st.Stream.Messages == 4 && st.Projection.Applied >= 4, fmt.Sprintf("%+v %+v", st.Stream, st.Projection)
	})
	credsFile := filepath.Join(cfg.StateDir, "client-context.json")
	waitUntil(t, 5*time.Second, func() (bool, string) {
		return strings.Contains(log.String(), "local subscriber listener up") && strings.Contains(log.String(), credsFile), log.String()
	})
	nc, err := readerConn(t, credsFile, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}

	// Reading stored messages works.
	stored := directBatch(t, nc, eventlog.LocalStream, 1, "pi.evt.>")
	if len(stored) != 4 || stored[3].Header.Get("Nats-Sequence") != "4" || stored[3].Header.Get("Nats-Subject") != "pi.evt.ws-l.listen-session" {
		t.Fatalf("read %d lines of PI_LOCAL, want 4 up to sequence 4", len(stored))
	}
	values := directBatch(t, nc, "KV_"+projection.Bucket, 1, "$KV."+projection.Bucket+".>")
	if len(values) == 0 {
		t.Fatal("no value in pi_proj")
	}
	kvSubj := values[0].Header.Get("Nats-Subject")
	value, err := nc.Request("$JS.API.DIRECT.GET.KV_"+projection.Bucket+"."+kvSubj, nil, 5*time.Second)
	if err != nil || len(value.Data) == 0 {
		t.Fatalf("get %s: %v %v", kvSubj, value, err)
	}

	if st, err := d.status(t.Context()); err != nil || st.Listener == nil || st.Listener.Answered < 3 {
		t.Errorf("status of the read relay: %+v %v, want 3 reads answered at least", st.Listener, err)
	}

	ijs := d.log.JetStream()
	info := func(name string) jetstream.StreamState {
		st, err := ijs.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State
	}
	before, kvBefore := info(eventlog.LocalStream), info("KV_"+projection.Bucket)

	// Changing anything is refused. A refused request gets no reply.
	refused := func(what, subj, body string) {
		t.Helper()
		if m, err := nc.Request(subj, []byte(body), time.Second); err == nil {
			t.Errorf("the listener's user could %s: %s", what, m.Data)
		}
	}
	deliverInto := `{"stream_name":"KV_pi_proj","config":{"deliver_subject":"pi.evt.ws-l.listen-session","deliver_policy":"all","ack_policy":"none"}}`
	refused("create a push consumer delivering into PI_LOCAL", "$JS.API.CONSUMER.CREATE.KV_pi_proj", deliverInto)
	refused("create a durable consumer", "$JS.API.CONSUMER.CREATE.PI_LOCAL.evil", `{"stream_name":"PI_LOCAL","config":{"durable_name":"evil"}}`)
	refused("delete PI_LOCAL", "$JS.API.STREAM.DELETE.PI_LOCAL", "")
	refused("purge pi_proj", "$JS.API.STREAM.PURGE.KV_pi_proj", "")
	refused("create a stream", "$JS.API.STREAM.CREATE.EVIL", `{"name":"EVIL","subjects":["evil.>"]}`)
	refused("read the daemon's account", "$JS.API.INFO", "")
	refused("read the hub's API", "$JS.hub.API.INFO", "")
	js, _ := jetstream.New(nc)
	if _, err := js.Stream(t.Context(), eventlog.LocalStream); err == nil {
		t.Error("the listener's user has the JetStream API")
	}
	nc.Publish("pi.evt.ws-l.listen-session", []byte(`{"type":"message","id":"forged"}`))
	nc.Publish(kvSubj, []byte("forged"))
	// A direct get answered on a stream's subject: the answer stays with
	// the readers, who see a stored message again (they go by sequence).
	nc.PublishRequest("$JS.API.DIRECT.GET.PI_LOCAL", "pi.evt.ws-l.listen-session", []byte(`{"seq":1}`))
	nc.PublishRequest("$JS.API.DIRECT.GET.PI_LOCAL", kvSubj, []byte(`{"seq":1}`))
	for _, subj := range []string{">", "$JS.API.>", "_INBOX_ws-l.>", "pi.up.>"} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		nc.Flush()
		if err := nc.LastError(); err == nil || !strings.Contains(err.Error(), "Permissions Violation for Subscription to") {
			t.Errorf("subscribing to %s: %v, want a permissions violation", subj, err)
		}
	}
	// Connections are bounded, the reader's own included.
	var more []*nats.Conn
	for range 64 {
		c, err := readerConn(t, credsFile)
		if err != nil {
			break
		}
		more = append(more, c)
	}
	if len(more)+1 > 16 {
		t.Errorf("%d connections at once, want at most 16", len(more)+1)
	}
	for _, c := range more {
		c.Close()
	}

	// The honest path afterwards: a new line reaches a reader live, with
	// its stream sequence, and its projected values too.
	nc, err = readerConn(t, credsFile)
	if err != nil {
		t.Fatalf("connect after the attacks: %v", err)
	}
	live, err := nc.SubscribeSync("pi.evt.>")
	if err != nil {
		t.Fatal(err)
	}
	kvLive, err := nc.SubscribeSync("$KV." + projection.Bucket + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	appendLine(t, path, msgLine("live", "list-2", "seen live"))
	m, err := live.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the new line never reached a reader: %v", err)
	}
	if m.Subject != "pi.evt.ws-l.listen-session" || m.Header.Get("Nats-Stream") != eventlog.LocalStream ||
		m.Header.Get("Nats-Sequence") != fmt.Sprint(before.LastSeq+1) || !strings.Contains(string(m.Data), "seen live") {
		t.Errorf("live: %s %v %s, want the new line at PI_LOCAL %d", m.Subject, m.Header, m.Data, before.LastSeq+1)
	}
	if m, err := kvLive.NextMsg(10 * time.Second); err != nil || m.Header.Get("Nats-Stream") != "KV_"+projection.Bucket {
		t.Errorf("no projected value live: %v %v", m, err)
	}

	// Intact: one line more and nothing else.
	after := info(eventlog.LocalStream)
	if after.Msgs != before.Msgs+1 || after.LastSeq != before.LastSeq+1 || after.NumSubjects != 1 {
		t.Errorf("PI_LOCAL changed: %+v, was %+v", after, before)
	}
	ikv, err := ijs.KeyValue(t.Context(), projection.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(kvSubj, "$KV."+projection.Bucket+".")
	if e, err := ikv.Get(t.Context(), key); err != nil || string(e.Value()) == "forged" {
		t.Errorf("pi_proj %s deleted or forged: %v", key, err)
	}
	if st := info("KV_" + projection.Bucket); st.Consumers != kvBefore.Consumers {
		t.Errorf("pi_proj has %d consumers, had %d", st.Consumers, kvBefore.Consumers)
	}
	if st := info(eventlog.LocalStream); st.Consumers != before.Consumers {
		t.Errorf("PI_LOCAL has %d consumers, had %d", st.Consumers, before.Consumers)
	}
	if _, err := ijs.Stream(t.Context(), "EVIL"); err == nil {
		t.Error("stream EVIL exists")
	}
}

// TestRePublishOnlyWithListener: PI_LOCAL and the projection's bucket
// republish each message for the local listener's readers only while the
// daemon has a listener: the server's work for it cost a first read about
// a tenth of its rate (eventlog.LivePrefix). Started with a listener, then
// without, then with again over the same store.
func TestRePublishOnlyWithListener(t *testing.T) {
	cfg := stationConfig(t, "ws-r", "")
	cfg.HubURLs, cfg.Listen = nil, "127.0.0.1:0"
	s := runStation(t, cfg)
	republishes := func(want bool) {
		t.Helper()
		js := s.d.log.JetStream()
		for _, name := range []string{eventlog.LocalStream, "KV_" + projection.Bucket} {
			waitUntil(t, 10*time.Second, func() (bool, string) {
				st, err := js.Stream(t.Context(), name)
				if err != nil {
					return false, err.Error()
				}
				rp := st.CachedInfo().Config.RePublish
				return (rp != nil) == want, fmt.Sprintf("%s republishes %+v, want %v", name, rp, want)
			})
		}
	}
	republishes(true)
	s.stop()
	cfg.Listen = ""
	s.start()
	republishes(false)
	s.stop()
	cfg.Listen = "127.0.0.1:0"
	s.start()
	republishes(true)
}
