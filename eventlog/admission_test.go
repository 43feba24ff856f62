package eventlog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
)

// rawPublish stores one message on the hub as a node could send it,
// whatever its headers say.
func rawPublish(t *testing.T, js jetstream.JetStream, subj string, data []byte, hdr map[string]string) {
	t.Helper()
	m := nats.NewMsg(subj)
	m.Data = data
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	if _, ok := hdr[eventlog.HdrSha]; !ok {
		sum := sha256.Sum256(data)
		m.Header.Set(eventlog.HdrSha, hex.EncodeToString(sum[:]))
	}
	if _, err := js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestDownloaderAdmits: what another node sends that is not a whole, valid
// line never enters PI_ALL, the honest node's lines around it all do, a
// never-ending split line holds no more than one line's worth, and a
// restart does not examine the rejected messages again.
func TestDownloaderAdmits(t *testing.T) {
	hubJS, ws, all := hubAndLeaf(t)
	ctx := context.Background()
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	ann := eventlog.UpSubject("ann", "s1")
	last, _, err := pub.Publish(ctx, ann, 0, append(mkLines(5, 100, "a"), mkLines(1, 3*eventlog.MaxChunk, "big")...))
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", eventlog.MaxChunk))
	for i := range 20 { // split lines whose end never comes, 5 MiB in all
		rawPublish(t, hubJS, eventlog.UpSubject("eve", fmt.Sprint("m", i)), chunk,
			map[string]string{eventlog.HdrChunk: "1/3", eventlog.HdrType: "message", eventlog.HdrID: "x", eventlog.HdrSha: strings.Repeat("0", 64)})
	}
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "m0"), chunk, map[string]string{eventlog.HdrChunk: "1/1000000", eventlog.HdrSha: strings.Repeat("0", 64)})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "m0"), chunk, map[string]string{eventlog.HdrChunk: "7/9", eventlog.HdrSha: strings.Repeat("0", 64)})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "h1"), []byte(`[1,2]`), map[string]string{eventlog.HdrType: "session", eventlog.HdrID: "h1"})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s1"), []byte("{\"type\":\"message\",\"id\":\"e1\"}\n{\"type\":\"message\",\"id\":\"e2\"}"),
		map[string]string{eventlog.HdrType: "message", eventlog.HdrID: "e1"})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s1"), []byte(`{"type":"message","id":"a0","message":{}}`),
		map[string]string{eventlog.HdrType: "message", eventlog.HdrID: "other"})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s1"), []byte(`{"type":"message","id":"e3"}`),
		map[string]string{eventlog.HdrType: "message", eventlog.HdrID: "e3", eventlog.HdrFile: strings.Repeat("f", 300) + ".jsonl"})
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s1")+".extra", []byte(`{"type":"message","id":"e4"}`), nil)
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s1"), []byte(`{"op":"delete","file":"--p--/x.jsonl"}`),
		map[string]string{eventlog.HdrType: "tombstone", eventlog.HdrOp: eventlog.OpDelete, eventlog.HdrFile: "--p--/x.jsonl"})
	if last, _, err = pub.Publish(ctx, ann, last, mkLines(2, 100, "b")); err != nil {
		t.Fatal(err)
	}

	state, err := eventlog.OpenState(ctx, all.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	run := func(gate *admit.Gate) (stop func()) { return runDownloader(t, ws, all, gate, state) }
	g1 := admit.New("w1", admit.Limits{MaxLine: 1 << 20}, all, nil)
	stop := run(g1)
	want := uint64(5 + 4 + 2) // the big line is four messages
	waitCount(t, all, want)
	// More of eve's junk, after which the first downloader has examined
	// everything: its rejections end the hub stream.
	rawPublish(t, hubJS, eventlog.UpSubject("eve", "s2"), []byte(`"x"`), map[string]string{eventlog.HdrType: "session", eventlog.HdrID: "s2"})
	testWait(t, func() bool {
		// Until the downloader has recorded that it examined them all.
		// Its value is "SEQ NODE SRC", the last message examined.
		e, err := state.Get(ctx, "downloader.skipped")
		return err == nil && strings.HasPrefix(string(e.Value()), fmt.Sprint(hubLastSeq(t, hubJS), " eve "))
	})
	stop()
	s := g1.Stats()
	if s.ByOrigin["eve"].Rejected < 26 || s.ByOrigin["ann"].Rejected != 0 {
		t.Errorf("rejections by origin: %+v", s.ByOrigin)
	}
	// A subject that names no session counts against its node (before:
	// against "", which status showed as a node without a name).
	for _, reason := range []admit.Reason{admit.BrokenChunks, admit.NotObject, admit.LineBreak, admit.HeaderMismatch, admit.BadFileName, admit.NoAuthority, admit.BadSubject} {
		if s.ByOrigin["eve"].ByReason[reason] == 0 {
			t.Errorf("no rejection for %s: %v", reason, s.ByOrigin["eve"].ByReason)
		}
	}
	n := 0
	err = eventlog.ReadFiltered(ctx, all.JetStream(), eventlog.AllStream, eventlog.AllPrefix+".>", 0xffffffff, false, func(ev *eventlog.Event) error {
		if ev.Node != "ann" {
			t.Errorf("PI_ALL holds %s's event %q", ev.Node, ev.Raw)
		}
		n++
		return nil
	})
	if err != nil || n != 8 {
		t.Errorf("PI_ALL: %d lines (want 8): %v", n, err)
	}

	// A restart starts after the rejected messages.
	if _, _, err = pub.Publish(ctx, ann, last, mkLines(1, 100, "c")); err != nil {
		t.Fatal(err)
	}
	g2 := admit.New("w1", admit.Limits{MaxLine: 1 << 20}, all, nil)
	stop = run(g2)
	defer stop()
	waitCount(t, all, want+1)
	if r := g2.Stats().Rejected; r != 0 {
		t.Errorf("after a restart, %d rejected messages were examined again", r)
	}
}

func testWait(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hubLastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	s, err := js.Stream(context.Background(), eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}
