package seal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/pisyncd/pisyncd/keyring"
)

// keyStore stands in for the hub's key stream: a handle is the sequence of
// a key message, kept with the node and token it was published for.
type keyStore struct {
	node string
	msgs []keyMsg
}

type keyMsg struct {
	node, tok string
	body      []byte
}

func (k *keyStore) publish(tok string, body []byte) (uint64, error) {
	k.msgs = append(k.msgs, keyMsg{k.node, tok, bytes.Clone(body)})
	return uint64(len(k.msgs)), nil
}

// open opens envs as a downloader does: fetch the key message the first
// envelope names, then open.
func (k *keyStore) open(o *Opener, node, tok string, pos uint64, envs [][]byte) ([]byte, error) {
	plain, err := o.Open(node, tok, pos, envs, 1<<20)
	var need *NeedKeyError
	if !errors.As(err, &need) {
		return plain, err
	}
	if need.Handle == 0 || need.Handle > uint64(len(k.msgs)) {
		return nil, errors.New("no such key message")
	}
	m := k.msgs[need.Handle-1]
	if m.node != node || m.tok != tok {
		return nil, ErrMoved // the downloader checks the subject
	}
	if err := o.AddKey(node, tok, need.Handle, m.body); err != nil {
		return nil, err
	}
	return o.Open(node, tok, pos, envs, 1<<20)
}

func TestSealV2(t *testing.T) {
	r := keyring.New(now)
	ks := &keyStore{node: "a"}
	s := NewSealer(r, "a")
	plain := marker(t, 2000)
	tok, envs, err := s.SealV2("s1", 5, plain, 1024, ks.publish)
	if err != nil || len(envs) < 2 {
		t.Fatalf("%d envelopes: %v", len(envs), err)
	}
	// One key message per data key, not per line.
	if _, _, err := s.SealV2("s1", 6, plain, 1024, ks.publish); err != nil || len(ks.msgs) != 1 {
		t.Fatalf("%d key messages after two lines: %v", len(ks.msgs), err)
	}
	if len(ks.msgs[0].body) != KeyMsgLen || ks.msgs[0].body[0] != Version2 {
		t.Fatalf("key message %x", ks.msgs[0].body)
	}
	for _, e := range envs {
		if h, ok := Handle(e); !ok || h != 1 || len(e) > 1024 {
			t.Fatalf("envelope of %d bytes, handle %d", len(e), h)
		}
	}
	if got, err := ks.open(NewOpener(r), "a", tok, 5, envs); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open: %v", err)
	}
	// An opener without the key message waits for it, naming it.
	var need *NeedKeyError
	if _, err := NewOpener(r).Open("a", tok, 5, envs, 1<<20); !errors.As(err, &need) || need.Handle != 1 {
		t.Fatalf("without the key message: %v", err)
	}
	// Every byte of every envelope.
	for i := range envs {
		for j := range envs[i] {
			c := cloneAll(envs)
			c[i][j] ^= 0x01
			if _, err := ks.open(NewOpener(r), "a", tok, 5, c); err == nil {
				t.Fatalf("envelope %d byte %d flipped: opened", i, j)
			}
		}
	}
	// Every byte of the key message.
	for j := range ks.msgs[0].body {
		b := bytes.Clone(ks.msgs[0].body)
		b[j] ^= 0x01
		if err := NewOpener(r).AddKey("a", tok, 1, b); err == nil {
			t.Fatalf("key message byte %d flipped: unwrapped", j)
		}
	}
	// The key message of another node or session does not unwrap.
	if err := NewOpener(r).AddKey("b", tok, 1, ks.msgs[0].body); !errors.Is(err, ErrMoved) {
		t.Errorf("key message for another node: %v", err)
	}
	if err := NewOpener(r).AddKey("a", Token(r, "s2"), 1, ks.msgs[0].body); !errors.Is(err, ErrMoved) {
		t.Errorf("key message for another session: %v", err)
	}
	cases := misplacedCases(tok, Token(r, "s2"), envs)
	for _, c := range cases {
		if _, err := ks.open(NewOpener(r), c.node, c.tok, c.pos, c.envs); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Another session's key message under this session's handle: the
	// envelope's associated data binds the handle, and the key differs.
	_, _, _ = s.SealV2("s2", 5, plain, 1024, ks.publish)
	o := NewOpener(r)
	if err := o.AddKey("a", Token(r, "s2"), 1, ks.msgs[1].body); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Open("a", Token(r, "s2"), 5, envs, 1<<20); err == nil {
		t.Error("envelopes opened under another session's key message")
	}
	// Without a keyring: wait for a key.
	if _, err := NewOpener(nil).Open("a", tok, 5, envs, 1<<20); !errors.Is(err, ErrNoKey) {
		t.Errorf("no keyring: %v", err)
	}
	// A failed publish leaves no data key: the next line draws a new one.
	s.Forget("s1")
	if _, _, err := s.SealV2("s1", 7, plain, 1024, func(string, []byte) (uint64, error) { return 0, errors.New("down") }); err == nil {
		t.Fatal("sealed without publishing its key")
	}
	if _, ok := s.keys[tok]; ok {
		t.Fatal("a data key kept after its key message failed")
	}
}

// A version 2 envelope whose key message is gone (an erase) cannot be
// opened with the team key alone: the data key is in no envelope.
func TestSealV2KeyNotInEnvelope(t *testing.T) {
	r := keyring.New(now)
	ks := &keyStore{node: "a"}
	_, envs, err := NewSealer(r, "a").SealV2("s", 1, []byte("secret"), 1024, ks.publish)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(envs[0], ks.msgs[0].body[1:]) {
		t.Fatal("the wrapped key is in the envelope")
	}
	if len(envs[0]) >= KeyMsgLen+Overhead2 {
		t.Fatalf("a %d-byte envelope could hold its wrapped key", len(envs[0]))
	}
}

func FuzzOpenV2(f *testing.F) {
	r := keyring.New(now)
	ks := &keyStore{node: "a"}
	tok, envs, err := NewSealer(r, "a").SealV2("s", 3, []byte(`{"type":"message"}`), 1024, ks.publish)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(envs[0], ks.msgs[0].body, uint64(3))
	f.Add([]byte{Version2}, []byte{Version2}, uint64(0))
	f.Fuzz(func(t *testing.T, env, key []byte, pos uint64) {
		o := NewOpener(r)
		h, _ := Handle(env)
		if o.AddKey("a", tok, h, key) == nil && !bytes.Equal(key, ks.msgs[0].body) {
			t.Fatalf("a forged key message unwrapped: %x", key)
		}
		plain, err := o.Open("a", tok, pos, [][]byte{env}, 1<<20)
		if err == nil && !bytes.Equal(env, envs[0]) {
			t.Fatalf("a forged envelope opened: %q", plain)
		}
	})
}

// The opener keeps at most maxCached data keys, dropping the least
// recently used: one in use stays however many others pass through.
func TestOpenerLRU(t *testing.T) {
	r := keyring.New(now)
	ks := &keyStore{node: "a"}
	s := NewSealer(r, "a")
	o := NewOpener(r)
	tok, hot, err := s.SealV2("hot", 1, []byte("x"), 1024, ks.publish)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.open(o, "a", tok, 1, hot); err != nil {
		t.Fatal(err)
	}
	for i := range maxCached + 10 {
		sid := fmt.Sprintf("s%d", i)
		tk, envs, err := s.SealV2(sid, 1, []byte("y"), 1024, ks.publish)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ks.open(o, "a", tk, 1, envs); err != nil {
			t.Fatal(err)
		}
		if _, err := o.Open("a", tok, 1, hot, 1<<20); err != nil {
			t.Fatalf("after %d other keys the one in use is gone: %v", i+1, err)
		}
	}
	if len(o.cache) != maxCached || o.lru.Len() != maxCached {
		t.Fatalf("%d cached (%d in the list), want %d", len(o.cache), o.lru.Len(), maxCached)
	}
	o.Forget("hot")
	if _, err := o.Open("a", tok, 1, hot, 1<<20); !errors.Is(err, ErrNeedKey) {
		t.Fatalf("after Forget: %v", err)
	}
	if len(o.cache) != o.lru.Len() {
		t.Fatalf("%d cached, %d in the list", len(o.cache), o.lru.Len())
	}
}

// TestCheck: one chunk is checked on its own against the position,
// session, node and chunk number claimed for it, as its opening would.
func TestCheck(t *testing.T) {
	r := keyring.New(now)
	ks := &keyStore{node: "a"}
	tok, envs, err := NewSealer(r, "a").SealV2("s1", 5, marker(t, 2000), 1024, ks.publish)
	if err != nil || len(envs) < 2 {
		t.Fatalf("%d envelopes: %v", len(envs), err)
	}
	n := len(envs)
	o := NewOpener(r)
	var need *NeedKeyError
	if err := o.Check("a", tok, 5, envs[n-1], n, n); !errors.As(err, &need) || need.Handle != 1 {
		t.Fatalf("without the key message: %v", err)
	}
	if err := o.AddKey("a", tok, 1, ks.msgs[0].body); err != nil {
		t.Fatal(err)
	}
	for i, env := range envs {
		if err := o.Check("a", tok, 5, env, i+1, n); err != nil {
			t.Fatalf("chunk %d/%d: %v", i+1, n, err)
		}
	}
	flipped := bytes.Clone(envs[n-1])
	flipped[len(flipped)-1] ^= 1
	o.AddKey("b", tok, 1, ks.msgs[0].body) // refused: not b's; b has no key then
	for _, c := range []struct {
		name      string
		node, tok string
		pos       uint64
		env       []byte
		i, n      int
	}{
		{"a later position", "a", tok, 209, envs[n-1], n, n},
		{"an earlier position", "a", tok, 4, envs[n-1], n, n},
		{"another chunk number", "a", tok, 5, envs[n-1], 1, n},
		{"another chunk count", "a", tok, 5, envs[n-1], n, n + 1},
		{"a flipped byte", "a", tok, 5, flipped, n, n},
		{"garbage", "a", tok, 5, []byte("not an envelope"), 1, 1},
	} {
		if err := o.Check(c.node, c.tok, c.pos, c.env, c.i, c.n); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", c.name, err)
		}
	}
	if err := o.Check("b", tok, 5, envs[n-1], n, n); !errors.As(err, &need) {
		t.Errorf("another node's claim: %v, want the key message asked for (it then does not unwrap)", err)
	}
}
