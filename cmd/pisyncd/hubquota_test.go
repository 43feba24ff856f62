package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// TestHubNodeConsumersAndQuotas: what an attacker holding a registered
// node's key (ws-evil, team red) can no longer do on the hub, with nats.go:
// create a durable or any consumer but its own downloader's (dl_ws-evil) on
// PI_HUB, through the current or the legacy API; pull from, delete or take
// over another node's consumer; create a stream. And filling the hub's
// store: red's share fills up and refuses more, and team blue's nodes go
// on replicating. (Before, it created durables at will, and one team
// filled the store for everyone.)
func TestHubNodeConsumersAndQuotas(t *testing.T) {
	h := startSecureHub(t)
	// Three teams (pisyncd, red, blue): a third of 12 MiB each.
	h.cfg.MaxStore = 12 << 20
	share := int64(h.cfg.MaxStore) / 3
	seedEvil, seedA := h.addNode("ws-evil", "red"), h.addNode("ws-a", "red")
	seedB1, seedB2 := h.addNode("ws-b1", "blue"), h.addNode("ws-b2", "blue")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	newSecureStation(t, h, "ws-a", seedA, ca)

	admin, err := h.srv.ConnectTeam("red")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	victim := eventlog.HubConsumerName("ws-a")
	waitUntil(t, 20*time.Second, func() (bool, string) {
		_, err := ajs.Consumer(t.Context(), eventlog.HubStream, victim)
		return err == nil, fmt.Sprintf("ws-a's downloader consumer %s: %v", victim, err)
	})

	// The attacker runs a leaf node of its own with ws-evil's key (as
	// its pisyncd does) and a client on it: the hub's JetStream API is
	// reached through a leaf connection (on the client listener the hub
	// maps $JS.hub.API to $JS.API before checking permissions).
	seed, err := os.ReadFile(seedEvil)
	if err != nil {
		t.Fatal(err)
	}
	leafSrv, err := embedded.Start(context.Background(), embedded.Config{
		StateDir: t.TempDir(), NodeID: "ws-evil", HubURLs: []string{"tls://localhost:" + strings.Split(h.leaf, ":")[1]},
		HubNkeySeed: bytes.TrimSpace(seed), HubCAFile: ca,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer leafSrv.Close()
	nc, err := leafSrv.Connect(nats.CustomInboxPrefix(embedded.InboxPrefix("ws-evil")), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitUntil(t, 20*time.Second, func() (bool, string) {
		lz, err := leafSrv.NATS().Leafz(nil)
		return err == nil && len(lz.Leafs) == 1, "ws-evil's leaf connection to the hub"
	})
	ejs, _ := jetstream.NewWithDomain(nc, embedded.HubDomain)
	ctx := func() context.Context {
		c, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		t.Cleanup(cancel)
		return c
	}
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("ws-evil could %s", what)
		}
	}
	_, err = ejs.CreateConsumer(ctx(), eventlog.HubStream, jetstream.ConsumerConfig{Durable: "evil", AckPolicy: jetstream.AckExplicitPolicy})
	refused("create a durable consumer", err)
	_, err = ejs.CreateConsumer(ctx(), eventlog.HubStream, jetstream.ConsumerConfig{})
	refused("create an ephemeral consumer with a name of the library's", err)
	vc, err := ajs.Consumer(t.Context(), eventlog.HubStream, victim)
	if err != nil {
		t.Fatal(err)
	}
	takeover := vc.CachedInfo().Config
	takeover.HeadersOnly = true // ws-a would copy lines without their content
	_, err = ejs.CreateOrUpdateConsumer(ctx(), eventlog.HubStream, takeover)
	refused("change ws-a's consumer", err)
	_, err = nc.Request("$JS.hub.API.CONSUMER.DURABLE.CREATE.PI_HUB.evil2", []byte(`{"stream_name":"PI_HUB","config":{"durable_name":"evil2","ack_policy":"explicit"}}`), 2*time.Second)
	refused("create a durable through the legacy API", err)
	_, err = nc.Request("$JS.hub.API.CONSUMER.CREATE.PI_HUB", []byte(`{"stream_name":"PI_HUB","config":{"ack_policy":"none"}}`), 2*time.Second)
	refused("create a consumer through the legacy ephemeral API", err)
	_, err = nc.Request("$JS.hub.API.CONSUMER.MSG.NEXT.PI_HUB."+victim, []byte(`{"batch":1,"no_wait":true}`), 2*time.Second)
	refused("pull from ws-a's consumer", err)
	err = ejs.DeleteConsumer(ctx(), eventlog.HubStream, victim)
	refused("delete ws-a's consumer", err)
	_, err = ejs.CreateStream(ctx(), jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
	refused("create a stream", err)
	// Its own downloader's consumer it may create: the refusals above are
	// about the names, not a broken connection.
	// (Asked until it answers: under load the leaf's JetStream route to
	// the hub can be a moment late, "no responders"; a refusal by
	// permission never turns into a success.)
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		_, err := ejs.CreateConsumer(ctx(), eventlog.HubStream, jetstream.ConsumerConfig{
			Name: eventlog.HubConsumerName("ws-evil"), AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: 5 * time.Second,
		})
		return err == nil, fmt.Sprintf("ws-evil's own downloader consumer: %v", err)
	})

	// PI_KEYS: ws-evil reads a key message by sequence, lists key
	// subjects, writes its own key messages and tombstones, and can
	// neither write nor erase ws-a's: not on ws-a's subjects, not by a
	// roll-up on its own (nats-server grants roll-ups per stream, so
	// "Nats-Rollup: all" there would wipe every node's keys), not by a
	// delete or a purge.
	const victimSubj = "pi.key.ws-a.hvictim.k1"
	victimKey := nats.NewMsg(victimSubj)
	victimKey.Data = []byte("ws-a's wrapped data key")
	vack, err := ajs.PublishMsg(t.Context(), victimKey)
	if err != nil {
		t.Fatal(err)
	}
	forged := nats.NewMsg(victimSubj)
	_, err = ejs.PublishMsg(ctx(), forged)
	refused("publish on ws-a's key subject", err)
	forged.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	_, err = ejs.PublishMsg(ctx(), forged)
	refused("roll up ws-a's key subject", err)
	_, err = nc.Request("$JS.hub.API.STREAM.MSG.DELETE.PI_KEYS", []byte(fmt.Sprintf(`{"seq":%d}`, vack.Sequence)), 2*time.Second)
	refused("delete ws-a's key message", err)
	_, err = nc.Request("$JS.hub.API.STREAM.PURGE.PI_KEYS", []byte(`{}`), 2*time.Second)
	refused("purge PI_KEYS", err)
	// No direct get (eventlog's hubNoDirect): one asks for a batch, whose
	// answers the hub queues without bound. JetStream's message API, the
	// one read granted, takes no batch.
	for _, subj := range []string{"$JS.hub.API.DIRECT.GET.PI_KEYS", "$JS.hub.API.DIRECT.GET.PI_HUB", "$JS.hub.API.DIRECT.GET.PI_HUB.pi.up.ws-a.>"} {
		_, err = nc.Request(subj, []byte(`{"seq":1,"batch":1000}`), 2*time.Second)
		refused("ask "+subj, err)
	}
	for _, stream := range []string{eventlog.KeysStream, eventlog.HubStream} {
		m, err := nc.Request("$JS.hub.API.STREAM.MSG.GET."+stream, []byte(`{"seq":1,"batch":1000}`), 5*time.Second)
		if err == nil && !strings.Contains(string(m.Data), `"error"`) {
			t.Errorf("ws-evil asked %s for a batch: %.200s", stream, m.Data)
		}
	}
	var ownSeq uint64
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		ack, err := ejs.Publish(ctx(), "pi.key.ws-evil.hown.k1", []byte("ws-evil's own"))
		if err == nil {
			ownSeq = ack.Sequence
		}
		return err == nil, fmt.Sprintf("ws-evil's own key message: %v", err)
	})
	// Roll-ups on its own key subject: the hub refuses them (PI_KEYS
	// allows none), whatever their scope.
	for _, scope := range []string{jetstream.MsgRollupAll, jetstream.MsgRollupSubject} {
		m := nats.NewMsg("pi.key.ws-evil.hown.k2")
		m.Header.Set(jetstream.MsgRollup, scope)
		_, err := ejs.PublishMsg(ctx(), m)
		refused("publish a roll-up ("+scope+") on its own key subject", err)
	}
	// A tombstone on its own key subject replaces its own key message
	// and nothing else.
	subjs, err := eventlog.KeySubjects(ctx(), ejs, "pi.key.ws-evil.hown.>")
	if err != nil || len(subjs) != 1 || subjs[0] != "pi.key.ws-evil.hown.k1" {
		t.Fatalf("ws-evil lists its key subjects: %v, %v", subjs, err)
	}
	if _, err := ejs.Publish(ctx(), subjs[0], nil); err != nil {
		t.Fatalf("ws-evil's tombstone: %v", err)
	}
	testenv.WaitFor(t, 15*time.Second, func() (bool, string) {
		s, err := ejs.Stream(ctx(), eventlog.KeysStream)
		if err != nil {
			return false, err.Error()
		}
		m, err := s.GetMsg(ctx(), vack.Sequence)
		return err == nil && string(m.Data) == string(victimKey.Data), fmt.Sprintf("get key message %d by sequence: %v", vack.Sequence, err)
	})
	keysStream, err := ajs.Stream(t.Context(), eventlog.KeysStream)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := keysStream.GetMsg(t.Context(), vack.Sequence); err != nil || string(m.Data) != string(victimKey.Data) {
		t.Errorf("ws-a's key message after ws-evil's attempts: %v", err)
	}
	if m, err := keysStream.GetLastMsgForSubject(t.Context(), victimSubj); err != nil || m.Sequence != vack.Sequence {
		t.Errorf("ws-a's key subject holds another message after ws-evil's attempts: %v", err)
	}
	if _, err := keysStream.GetMsg(t.Context(), ownSeq); err == nil {
		t.Errorf("ws-evil's own key message %d is still there after its tombstone", ownSeq)
	}
	if m, err := keysStream.GetLastMsgForSubject(t.Context(), "pi.key.ws-evil.hown.k1"); err != nil || len(m.Data) != 0 {
		t.Errorf("ws-evil's key subject after its tombstone: %v", err)
	}

	hubStream, err := ajs.Stream(t.Context(), eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	lister := hubStream.ConsumerNames(t.Context())
	for name := range lister.Name() {
		if name != victim && name != eventlog.HubConsumerName("ws-evil") {
			t.Errorf("PI_HUB has a consumer %q", name)
		}
	}
	if _, err := ajs.Stream(t.Context(), "EVIL"); err == nil {
		t.Error("stream EVIL exists")
	}
	if info, err := ajs.Consumer(t.Context(), eventlog.HubStream, victim); err != nil {
		t.Errorf("ws-a's consumer: %v", err)
	} else if info.CachedInfo().Config.HeadersOnly {
		t.Error("ws-a's consumer was changed")
	}

	// Subscriptions: each connection to a team's account holds at most
	// maxSubsPerConn (a workstation's link holds 8). The hub reads its
	// leaf link in order: once a request after them is answered, it has
	// seen every subscription made before.
	for i := range 2 * 1024 {
		if _, err := nc.SubscribeSync(fmt.Sprintf("%s.flood.%d", embedded.InboxPrefix("ws-evil"), i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ejs.Stream(ctx(), eventlog.HubStream); err != nil {
		t.Fatalf("ws-evil after its subscriptions: %v", err)
	}
	lz, err := h.srv.NATS().Leafz(&server.LeafzOptions{Account: "red"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lz.Leafs {
		if l.NumSubs > 1024 {
			t.Errorf("%s's link holds %d subscriptions on the hub, want at most 1024", l.Name, l.NumSubs)
		}
	}

	// Fill red's share of the store: refused before it goes past it.
	payload := bytes.Repeat([]byte("x"), 256<<10)
	var stored int64
	var floodErr error
	for stored <= int64(h.cfg.MaxStore) {
		if _, floodErr = ejs.Publish(ctx(), "pi.up.ws-evil.flood", payload); floodErr != nil {
			break
		}
		stored += int64(len(payload))
	}
	if floodErr == nil || stored > share {
		t.Fatalf("ws-evil stored %d bytes (red's share %d), last error %v", stored, share, floodErr)
	}
	t.Logf("ws-evil stored %d bytes, then: %v", stored, floodErr)

	b1 := newSecureStation(t, h, "ws-b1", seedB1, ca)
	b2 := newSecureStation(t, h, "ws-b2", seedB2, ca)
	writeSession(t, b1, "blue-after-flood", 3)
	waitFile(t, b2, "blue-after-flood", 4)
}
