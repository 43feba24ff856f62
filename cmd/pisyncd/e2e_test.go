package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/replicate"
	"github.com/pisyncd/pisyncd/seal"
)

// e2eStation starts a workstation with PISYNC_ENCRYPT=on and ring (nil:
// no team key) in its key file.
func e2eStation(t *testing.T, name, hubURL string, ring *keyring.Ring) *station {
	t.Helper()
	home := t.TempDir()
	keyFile := filepath.Join(home, "team-key.json")
	if ring != nil {
		if err := keyring.Save(keyFile, ring); err != nil {
			t.Fatal(err)
		}
	}
	return newStationWith(t, name, hubURL, "", func(c *config.Config) {
		c.Encrypt, c.KeyFile = "on", keyFile
	})
}

// keyCmd runs `pisyncd key ARGS` against s's key file.
func keyCmd(t *testing.T, s *station, args ...string) (string, error) {
	t.Helper()
	t.Setenv("PISYNC_STATE_DIR", s.cfg.StateDir)
	t.Setenv("PISYNC_SESSIONS_DIR", s.cfg.SessionsDir)
	t.Setenv("PISYNC_KEY_FILE", s.cfg.KeyFile)
	var out bytes.Buffer
	err := keyCommand(args, &out)
	return out.String(), err
}

// carryKey exports from's team keys and imports them into to, as a user
// carries `pisyncd key export`'s block over.
func carryKey(t *testing.T, from, to *station) {
	t.Helper()
	out, err := keyCmd(t, from, "export")
	if err != nil {
		t.Fatal(err)
	}
	exported := filepath.Join(t.TempDir(), "export.txt")
	if err := os.WriteFile(exported, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := keyCmd(t, to, "import", exported); err != nil {
		t.Fatal(err)
	}
}

// rotateKey runs `pisyncd key rotate` on s and returns the keyring once
// the daemon seals with its new key.
func rotateKey(t *testing.T, s *station) *keyring.Ring {
	t.Helper()
	if _, err := keyCmd(t, s, "rotate"); err != nil {
		t.Fatal(err)
	}
	rotated, err := keyring.Load(s.cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon reads the keyring again within a second of a change.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := s.status()
		return err == nil && st.Encryption.CurrentKey == rotated.Current, fmt.Sprintf("%s's encryption status %+v (%v)", s.name, st.Encryption, err)
	})
	return rotated
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// hubMsgs returns PI_HUB's messages on filter, read on the hub.
func hubMsgs(t *testing.T, h *testHub, filter string) []*jetstream.RawStreamMsg {
	t.Helper()
	return hubStreamMsgs(t, h, eventlog.HubStream, filter)
}

// hubStreamMsgs reads every message on filter of a hub stream.
func hubStreamMsgs(t *testing.T, h *testHub, stream, filter string) []*jetstream.RawStreamMsg {
	t.Helper()
	s, done := h.stream(t, stream)
	defer done()
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; {
		m, err := s.GetMsg(t.Context(), seq, jetstream.WithGetMsgSubject(filter))
		if err != nil {
			return out
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
}

// e2eFile is the session's file on s, in the folder of its cwd.
func e2eFile(s *station, sid string) string {
	m, _ := filepath.Glob(filepath.Join(s.cfg.SessionsDir, "--sec-*--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl"))
	if len(m) == 1 {
		return m[0]
	}
	return filepath.Join(s.cfg.SessionsDir, "missing")
}

func fileText(p string) string { b, _ := os.ReadFile(p); return string(b) }

// writeLaterSession writes a new two-line session on s, for a machine
// that joins to copy after whatever the test looks at: its id and file.
func writeLaterSession(t *testing.T, s *station) (sid, path string) {
	t.Helper()
	sid = "0199eeee-0000-7000-8000-" + randomHex(t, 12)
	path = filepath.Join(s.cfg.SessionsDir, "--sec-later--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(path), 0o700)
	appendLine(t, path, hdrLine(sid, "/sec/later"))
	appendLine(t, path, msgLine("l0000001", "", "a later session"))
	return sid, path
}

// TestEncryptedReplication: with a team key on A and B, a random marker
// written on A reaches B's file and no byte of the hub's store, which
// holds sealed envelopes (no plaintext, compressed or not) under keyed-hash
// session tokens; ciphertext a hostile hub client moves to another
// session, node or position is rejected and counted; a machine with the
// wrong key copies nothing, says why, and converges after key import;
// after a rotation on A, B waits for the new key, then converges; erase
// and the hub operator's erase leave no line's data key on the hub.
func TestEncryptedReplication(t *testing.T) {
	hub := startTestHub(t)
	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	b := e2eStation(t, "ws-b", hub.url(), ring)
	c := e2eStation(t, "ws-c", hub.url(), keyring.New(time.Now())) // another team's key

	marker, cwdMarker := randomHex(t, 64), randomHex(t, 32)
	sid := "0199eeee-0000-7000-8000-" + randomHex(t, 12)
	p := filepath.Join(a.cfg.SessionsDir, "--sec-"+cwdMarker+"--", "2026-11-30T00-00-00-000Z_"+sid+".jsonl")
	os.MkdirAll(filepath.Dir(p), 0o700)
	appendLine(t, p, hdrLine(sid, "/sec/"+cwdMarker))
	parent := ""
	for i := range 20 {
		id := fmt.Sprintf("e%07d", i)
		appendLine(t, p, msgLine(id, parent, fmt.Sprintf("line %d: %s", i, marker)))
		parent = id
	}
	want := fileText(p)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, _ := b.status()
		return fileText(e2eFile(b, sid)) == want, fmt.Sprintf("B: %d of %d bytes; downloader %+v encryption %+v", len(fileText(e2eFile(b, sid))), len(want), st.Downloader, st.Encryption)
	})
	tok := seal.Token(ring, sid)
	if n, _ := hub.count("pi.up.ws-a." + tok); n != 21 {
		t.Fatalf("hub holds %d sealed lines on %s, want 21", n, tok)
	}

	// C has the wrong key: nothing of A's is copied, and it says why: the
	// session is held for the key.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := c.status()
		return err == nil && st.Downloader != nil && st.Downloader.Held == 1 && slices.Contains(st.Downloader.HeldFor, ring.Current),
			fmt.Sprintf("C's downloader %+v (%v)", st.Downloader, err)
	})
	if _, err := os.Stat(e2eFile(c, sid)); err == nil {
		t.Fatal("C wrote A's session without its key")
	}

	// Nothing of the session on the hub's disk: not the marker, the cwd,
	// the session id or an entry id. B's store, which holds the lines in
	// clear, shows the check can find them.
	hub.stop()
	for _, needle := range []string{marker[:24], cwdMarker[:24], sid, "e0000007"} {
		if hits := grepTree(hub.dir, needle); len(hits) > 0 {
			t.Errorf("the hub's store holds %q in %v", needle, hits)
		}
	}
	if hits := grepTree(b.cfg.StateDir, marker[:24]); len(hits) == 0 {
		t.Fatal("the marker is not in B's store either: the search finds nothing")
	}
	hub.start()
	msgs := hubMsgs(t, hub, "pi.up.ws-a."+tok)
	for _, m := range msgs {
		for k := range m.Header {
			switch {
			case k == eventlog.HdrSeal, k == eventlog.HdrSrcSeq, k == eventlog.HdrChunk:
			case strings.HasPrefix(k, "Nats-"): // the server's and the batch protocol's
			default:
				t.Errorf("sealed message %d shows the hub header %s: %q", m.Sequence, k, m.Header.Get(k))
			}
		}
		if id := m.Header.Get(nats.MsgIdHdr); strings.Contains(id, sid) {
			t.Errorf("message id %q names the session", id)
		}
		// Not compressed plaintext either: no suffix of it decompresses
		// to anything holding the marker.
		for o := 0; o < len(m.Data); o++ {
			if n, err := s2.DecodedLen(m.Data[o:]); err != nil || n > 1<<20 {
				continue
			}
			if d, err := s2.Decode(nil, m.Data[o:]); err == nil && bytes.Contains(d, []byte(marker[:24])) {
				t.Fatalf("message %d is compressed plaintext from byte %d", m.Sequence, o)
			}
		}
	}

	// A hostile hub client moves A's first line to another session, to
	// another node, and to another position of the same session.
	hc, err := hub.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	hjs, _ := jetstream.New(hc)
	first, last := msgs[1], msgs[len(msgs)-1]
	move := func(subj, srcSeq string) {
		t.Helper()
		m := nats.NewMsg(subj)
		m.Data = first.Data
		m.Header.Set(eventlog.HdrSeal, first.Header.Get(eventlog.HdrSeal))
		m.Header.Set(eventlog.HdrSrcSeq, srcSeq)
		if _, err := hjs.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	move("pi.up.ws-a."+seal.Token(ring, "0199eeee-another-session"), first.Header.Get(eventlog.HdrSrcSeq))
	move("pi.up.ws-evil."+tok, first.Header.Get(eventlog.HdrSrcSeq))
	// A's own subject, with the checkpoint A expects (the last line's
	// position): A forwards on, B must not take it as a line.
	move("pi.up.ws-a."+tok, last.Header.Get(eventlog.HdrSrcSeq))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		if err != nil || st.Admission == nil {
			return false, fmt.Sprint(err)
		}
		ra, re := st.Admission.ByOrigin["ws-a"].ByReason, st.Admission.ByOrigin["ws-evil"].ByReason
		return ra[eventlog.RejectMoved] == 1 && ra[eventlog.RejectUndecryptable] == 1 && re[eventlog.RejectMoved] == 1,
			fmt.Sprintf("B's rejections %+v", st.Admission.ByOrigin)
	})
	if got := fileText(e2eFile(b, sid)); got != want {
		t.Fatalf("B's file changed after the moves:\n%s", got)
	}

	// C is given the team's key: another team's key is refused, then,
	// without it, the import works and C catches up with nothing lost.
	exported := filepath.Join(t.TempDir(), "key.txt")
	out, err := keyCmd(t, a, "export")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(exported, []byte(out), 0o600)
	if _, err := keyCmd(t, c, "import", exported); err == nil || !strings.Contains(err.Error(), "team") {
		t.Fatalf("importing another team's key over C's: %v", err)
	}
	os.Remove(c.cfg.KeyFile)
	if out, err := keyCmd(t, c, "import", exported); err != nil {
		t.Fatalf("import: %v %s", err, out)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, _ := c.status()
		return fileText(e2eFile(c, sid)) == want, fmt.Sprintf("C: %d of %d bytes; downloader %+v encryption %+v", len(fileText(e2eFile(c, sid))), len(want), st.Downloader, st.Encryption)
	})

	// Rotation mid-session: A's next lines are sealed with the new key; B
	// holds the session for it, then converges after importing it.
	rotated := rotateKey(t, a)
	for i := 20; i < 25; i++ {
		id := fmt.Sprintf("e%07d", i)
		appendLine(t, p, msgLine(id, parent, fmt.Sprintf("after rotation %d: %s", i, marker)))
		parent = id
	}
	want = fileText(p)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := b.status()
		return err == nil && st.Downloader.Held == 1 && slices.Contains(st.Downloader.HeldFor, rotated.Current), fmt.Sprintf("B's downloader %+v", st.Downloader)
	})
	newest := hubMsgs(t, hub, "pi.up.ws-a."+tok)
	km := keyMessage(t, hjs, newest[len(newest)-1].Data)
	if km == nil || !strings.HasPrefix(km.Subject, "pi.key.ws-a."+tok+".") {
		t.Fatalf("the last line's key message: %+v", km)
	}
	if kid := hex.EncodeToString(km.Data[1:9]); kid != rotated.Current {
		t.Fatalf("the last line is sealed under key %s, want the new %s", kid, rotated.Current)
	}
	carryKey(t, a, b)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, _ := b.status()
		return fileText(e2eFile(b, sid)) == want && st.Encryption.CopyWaiting == "" && st.Downloader.Held == 0, fmt.Sprintf("B: %d of %d bytes; downloader %+v encryption %+v", len(fileText(e2eFile(b, sid))), len(want), st.Downloader, st.Encryption)
	})

	// B writes a line of the session too: B's own data key, B's key
	// message.
	appendLine(t, e2eFile(b, sid), msgLine("from-b", parent, "written on B: "+marker))
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(fileText(p), "written on B"), "A has not B's line"
	})
	if n := len(hubStreamMsgs(t, hub, eventlog.KeysStream, "pi.key.ws-b."+tok+".>")); n != 1 {
		t.Fatalf("%d key messages of B for the session, want 1", n)
	}

	// Erase on A, and no hub erase yet: A tombstones its key messages of
	// the session before its erase event, B its own when it follows the
	// erase. Only the erase event's key message stays.
	lineHandles := map[uint64]bool{}
	for _, m := range hubMsgs(t, hub, "pi.up.*."+tok) {
		h, ok := seal.Handle(m.Data)
		if !ok {
			t.Fatalf("hub message %d is no version 2 envelope", m.Sequence)
		}
		lineHandles[h] = true
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := eraseViaDaemon(ctx, a.cfg, sid); err != nil {
		t.Fatal(err)
	}
	var eraseHandle uint64
	waitUntil(t, 30*time.Second, func() (bool, string) {
		_, events := hub.hubLines(t, tok)
		_, errB := os.Stat(e2eFile(b, sid))
		if events != 1 || errB == nil {
			return false, fmt.Sprintf("%d erase events on the hub; B's file: %v", events, errB)
		}
		for _, m := range hubMsgs(t, hub, "pi.up.ws-a."+tok) {
			if m.Header.Get(eventlog.HdrOp) == eventlog.OpErase {
				eraseHandle, _ = seal.Handle(m.Data)
			}
		}
		var left []string
		tombstones := map[string]int{}
		for _, m := range hubStreamMsgs(t, hub, eventlog.KeysStream, "pi.key.*."+tok+".>") {
			if len(m.Data) == 0 {
				tombstones[strings.Split(m.Subject, ".")[2]]++
			} else if m.Sequence != eraseHandle {
				left = append(left, fmt.Sprintf("%s@%d", m.Subject, m.Sequence))
			}
		}
		return len(left) == 0 && tombstones["ws-a"] > 0 && tombstones["ws-b"] == 1, fmt.Sprintf("key messages of the session left on the hub: %v (the erase event's: %d); tombstones by node %v", left, eraseHandle, tombstones)
	})
	if lineHandles[eraseHandle] {
		t.Fatal("the erase event is sealed under a data key of the session's lines")
	}

	// Whoever holds every team key and reads the hub (its operator's
	// connection, hc) opens no line of the session: only the erase event.
	attacker := seal.NewOpener(rotated)
	for _, m := range hubMsgs(t, hub, "pi.up.*."+tok) {
		node := strings.Split(m.Subject, ".")[2]
		src, _ := strconv.ParseUint(m.Header.Get(eventlog.HdrSrcSeq), 10, 64)
		km := keyMessage(t, hjs, m.Data)
		if km != nil && len(km.Data) > 0 {
			attacker.AddKey(node, tok, km.Sequence, km.Data)
		}
		plain, err := attacker.Open(node, tok, src, [][]byte{m.Data}, 1<<20)
		erase := m.Header.Get(eventlog.HdrOp) == eventlog.OpErase
		switch {
		case err == nil && !erase:
			t.Errorf("hub message %d of the erased session opens with the team key: %.60q", m.Sequence, plain)
		case err == nil && bytes.Contains(plain, []byte(marker[:24])):
			t.Errorf("the erase event holds the marker")
		case err != nil && erase:
			t.Errorf("the erase event does not open (%v): machines that were away could not follow it", err)
		}
	}

	// A workstation that joins now, with the right key, copies nothing
	// of the erased session, counts its lines erased, and copies a later
	// session as usual.
	d := e2eStation(t, "ws-d", hub.url(), rotated)
	sid2, p2 := writeLaterSession(t, a)
	waitUntil(t, 60*time.Second, func() (bool, string) {
		st, _ := d.status()
		return fileText(e2eFile(d, sid2)) == fileText(p2), fmt.Sprintf("D: downloader %+v encryption %+v admission %+v", st.Downloader, st.Encryption, st.Admission)
	})
	if _, err := os.Stat(e2eFile(d, sid)); err == nil {
		t.Fatal("D wrote the erased session")
	}
	if hits := grepTree(d.cfg.StateDir, marker[:24]); len(hits) > 0 {
		t.Fatalf("D's store holds the erased session's marker in %v", hits)
	}
	st, err := d.status()
	if err != nil || st.Admission == nil {
		t.Fatal(err)
	}
	if ea, eb := st.Admission.ByOrigin["ws-a"].ByReason[eventlog.RejectErased], st.Admission.ByOrigin["ws-b"].ByReason[eventlog.RejectErased]; ea < 26 || eb != 1 {
		t.Fatalf("D counts %d of A's and %d of B's lines erased, want at least 26 and 1: %+v", ea, eb, st.Admission.ByOrigin)
	}

	// The hub operator's erase by the session's token then leaves only
	// the erase event on the hub, and tombstones the key messages of the
	// session no message left names: here one of a node that is away
	// (ws-e, as if it had sealed lines and not come back since).
	away := nats.NewMsg("pi.key.ws-e." + tok + ".k1")
	away.Data = []byte("ws-e's wrapped data key")
	if _, err := hjs.PublishMsg(ctx, away); err != nil {
		t.Fatal(err)
	}
	res, err := hubErase(ctx, hc, tok, "", false, nil)
	if err != nil || res.Messages == 0 || res.KeySubjects != 1 {
		t.Fatalf("hub erase: %+v %v", res, err)
	}
	for _, m := range hubStreamMsgs(t, hub, eventlog.KeysStream, "pi.key.*."+tok+".>") {
		if len(m.Data) > 0 && m.Sequence != eraseHandle {
			t.Errorf("after hub erase the key message %s@%d is still there", m.Subject, m.Sequence)
		}
	}
	if km := keyMessage(t, hjs, hubMsgs(t, hub, "pi.up.ws-a."+tok)[0].Data); km == nil || km.Sequence != eraseHandle {
		t.Errorf("after hub erase the erase event's key message is gone: %+v", km)
	}
	left := hubMsgs(t, hub, "pi.up.*."+tok)
	for _, m := range left {
		if m.Header.Get(eventlog.HdrOp) != eventlog.OpErase {
			t.Errorf("hub message %d of the erased session is still there", m.Sequence)
		}
	}
	if len(left) == 0 {
		t.Fatal("the erase event is gone from the hub")
	}
}

// keyMessage reads from the hub's PI_KEYS the key message a version 2
// envelope names, as the hub operator can: nil when it is gone.
func keyMessage(t *testing.T, js jetstream.JetStream, env []byte) *jetstream.RawStreamMsg {
	t.Helper()
	h, ok := seal.Handle(env)
	if !ok {
		t.Fatalf("not a version 2 envelope: %x", env[:min(len(env), 16)])
	}
	s, err := js.Stream(t.Context(), eventlog.KeysStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(t.Context(), h)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEncryptedRealPi: a session the real pi writer writes on A, with a
// random marker in its prompt, reaches B byte for byte; the marker is in
// no byte of any message that crosses the hub's account (every subject:
// the leaf traffic up and the consumer deliveries down), nor of the hub's
// store.
func TestEncryptedRealPi(t *testing.T) {
	testenv.Oracle(t) // skips without node or shared/
	hub := startTestHub(t)
	ring := keyring.New(time.Now())
	a := e2eStation(t, "ws-a", hub.url(), ring)
	b := e2eStation(t, "ws-b", hub.url(), ring)

	hc, err := hub.srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	var mu sync.Mutex
	var seen, leaked int
	sub, err := hc.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if bytes.Contains(m.Data, []byte("pisyncd-marker")) || strings.Contains(fmt.Sprint(m.Header), "pisyncd-marker") {
			leaked++
			if leaked <= 20 {
				t.Logf("leak on %s (reply %s): %.200q", m.Subject, m.Reply, m.Data)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	hc.Flush()

	marker := "pisyncd-marker-" + randomHex(t, 48)
	const cwd = "/work/sealed"
	dir := filepath.Join(a.cfg.SessionsDir, replicate.CwdFolder(cwd))
	os.MkdirAll(dir, 0o700)
	sum := piWrite(t, `[{"op": "user", "text": "`+marker+`"}, {"op": "assistant", "text": "noted: `+marker+`"}]`, dir, "--cwd", cwd)
	bFile := filepath.Join(b.cfg.SessionsDir, replicate.CwdFolder(cwd), filepath.Base(sum.SessionFile))
	want := fileText(sum.SessionFile)
	if !strings.Contains(want, marker) {
		t.Fatal("pi did not write the marker")
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return fileText(bFile) == want, fmt.Sprintf("B: %d of %d bytes", len(fileText(bFile)), len(want))
	})
	samePi(t, "context", sum.SessionFile, bFile)
	// The hub asks B's own JetStream for its copy, in clear.
	for _, dom := range []string{embedded.Domain("ws-b"), embedded.HubDomain} {
		bjs, err := jetstream.NewWithDomain(hc, dom)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		s, err := bjs.Stream(ctx, eventlog.AllStream)
		if dom == embedded.HubDomain && err == nil {
			t.Errorf("the hub's own domain has a %s", eventlog.AllStream)
		}
		if err == nil {
			m, err := s.GetLastMsgForSubject(ctx, "pi.all.>")
			if err == nil && bytes.Contains(m.Data, []byte(marker)) {
				t.Errorf("the hub read B's PI_ALL through JetStream domain %q", dom)
			}
		}
		cancel()
	}
	mu.Lock()
	if seen == 0 || leaked > 0 {
		t.Errorf("%d of %d messages crossing the hub hold the marker", leaked, seen)
	}
	mu.Unlock()
	hub.stop()
	if hits := grepTree(hub.dir, "pisyncd-marker"); len(hits) > 0 {
		t.Errorf("the hub's store holds the marker in %v", hits)
	}
	if hits := grepTree(b.cfg.StateDir, marker); len(hits) == 0 {
		t.Error("the marker is not in B's store either: the search finds nothing")
	}
	hub.start()
}
