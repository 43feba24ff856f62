package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/pisyncd/pisyncd/keyring"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func marker(t testing.TB, n int) []byte {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(hex.EncodeToString(b))
}

func TestRoundTrip(t *testing.T) {
	r := keyring.New(now)
	s := NewSealer(r, "a")
	o := NewOpener(r)
	for _, size := range []int{0, 1, 1000, 300 << 10, 2 << 20} {
		plain := bytes.Repeat(marker(t, 64), size/64+1)[:size]
		tok, envs := s.Seal("sid-1", 7, plain, 256<<10)
		if tok != Token(r, "sid-1") {
			t.Fatalf("token %s", tok)
		}
		for _, e := range envs {
			if len(e) > 256<<10 {
				t.Fatalf("envelope of %d bytes", len(e))
			}
		}
		got, err := o.Open("a", tok, 7, envs, 64<<20)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	// Incompressible data larger than a chunk takes several.
	big := make([]byte, 600<<10)
	rand.Read(big)
	tok, envs := s.Seal("sid-1", 8, big, 256<<10)
	if len(envs) != 3 {
		t.Fatalf("%d envelopes for 600 KiB of noise", len(envs))
	}
	if got, err := o.Open("a", tok, 8, envs, 64<<20); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("noise: %v", err)
	}
	if _, err := o.Open("a", tok, 8, envs, 500<<10); !errors.Is(err, ErrOpen) {
		t.Fatalf("over maxLen: %v", err)
	}
}

// Sealed bytes hold no copy of the plaintext, compressed or not.
func TestNoPlaintext(t *testing.T) {
	r := keyring.New(now)
	m := marker(t, 64)
	plain := bytes.Repeat(append([]byte(`{"type":"message","text":"`), append(m, `"}`...)...), 50)
	_, envs := NewSealer(r, "a").Seal("s", 1, plain, 256<<10)
	all := bytes.Join(envs, nil)
	if bytes.Contains(all, m[:16]) || bytes.Contains(all, []byte("message")) {
		t.Fatal("plaintext in the envelope")
	}
	if len(all) > len(plain)/10 {
		t.Fatalf("%d sealed bytes for %d repetitive ones: not compressed", len(all), len(plain))
	}
}

func TestTamper(t *testing.T) {
	r := keyring.New(now)
	s := NewSealer(r, "a")
	plain := marker(t, 2000)
	tok, envs := s.Seal("s1", 5, plain, 1024)
	if len(envs) < 2 {
		t.Fatalf("%d envelopes", len(envs))
	}
	open := func(node, tok string, pos uint64, envs [][]byte) error {
		_, err := NewOpener(r).Open(node, tok, pos, envs, 1<<20)
		return err
	}
	if err := open("a", tok, 5, envs); err != nil {
		t.Fatal(err)
	}
	// Every byte of every envelope.
	for i := range envs {
		for j := range envs[i] {
			c := cloneAll(envs)
			c[i][j] ^= 0x01
			if err := open("a", tok, 5, c); err == nil {
				t.Fatalf("envelope %d byte %d flipped: opened", i, j)
			}
		}
	}
	cases := misplacedCases(tok, Token(r, "s2"), envs)
	for _, c := range cases {
		if err := open(c.node, c.tok, c.pos, c.envs); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Another session's envelope at this session's position.
	_, other := s.Seal("s2", 5, plain, 1024)
	if err := open("a", tok, 5, other); !errors.Is(err, ErrMoved) {
		t.Errorf("another session's envelopes: %v", err)
	}
	// The same key under another team id.
	r2 := *r
	r2.Team = "0011223344556677"
	if _, err := NewOpener(&r2).Open("a", tok, 5, envs, 1<<20); !errors.Is(err, ErrMoved) {
		t.Errorf("another team: %v", err)
	}
}

func cloneAll(envs [][]byte) [][]byte {
	out := make([][]byte, len(envs))
	for i := range envs {
		out[i] = bytes.Clone(envs[i])
	}
	return out
}

func TestWrongKey(t *testing.T) {
	r := keyring.New(now)
	tok, envs := NewSealer(r, "a").Seal("s", 1, []byte("x"), 1024)
	var nk *NoKeyError
	if _, err := NewOpener(keyring.New(now)).Open("a", tok, 1, envs, 1<<20); !errors.As(err, &nk) || nk.KeyID != r.Current {
		t.Fatalf("another team's key: %v", err)
	}
	if _, err := NewOpener(nil).Open("a", tok, 1, envs, 1<<20); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no keyring: %v", err)
	}
}

func TestRotation(t *testing.T) {
	r := keyring.New(now)
	s := NewSealer(r, "a")
	tok, before := s.Seal("s", 1, []byte("before"), 1024)
	old, _ := keyring.Import(keyring.Export(r)) // a machine that missed the rotation
	r.Rotate(now.Add(time.Hour))
	s.SetRing(r)
	_, after := s.Seal("s", 2, []byte("after"), 1024)
	if bytes.Equal(before[0][:headLen], after[0][:headLen]) {
		t.Fatal("the same data key after a rotation")
	}
	o := NewOpener(r)
	for pos, envs := range map[uint64][][]byte{1: before, 2: after} {
		if _, err := o.Open("a", tok, pos, envs, 1<<20); err != nil {
			t.Fatalf("position %d: %v", pos, err)
		}
	}
	oo := NewOpener(old)
	if _, err := oo.Open("a", tok, 1, before, 1<<20); err != nil {
		t.Fatalf("old key, old data: %v", err)
	}
	if _, err := oo.Open("a", tok, 2, after, 1<<20); !errors.Is(err, ErrNoKey) {
		t.Fatalf("old key, new data: %v", err)
	}
}

func TestForget(t *testing.T) {
	r := keyring.New(now)
	s := NewSealer(r, "a")
	_, e1 := s.Seal("s", 1, []byte("x"), 1024)
	s.Forget("s")
	_, e2 := s.Seal("s", 2, []byte("y"), 1024)
	if bytes.Equal(e1[0][:headLen], e2[0][:headLen]) {
		t.Fatal("the data key survived Forget")
	}
	o := NewOpener(r)
	tok := Token(r, "s")
	if _, err := o.Open("a", tok, 1, e1, 1<<20); err != nil {
		t.Fatal(err)
	}
	o.Forget("s")
	if len(o.cache) != 0 {
		t.Fatalf("%d data keys cached after Forget", len(o.cache))
	}
}

func FuzzOpen(f *testing.F) {
	r := keyring.New(now)
	tok, envs := NewSealer(r, "a").Seal("s", 3, []byte(`{"type":"message"}`), 1024)
	f.Add(envs[0], uint64(3))
	f.Add([]byte{Version}, uint64(0))
	// A version 2 envelope: it never opens without its key message.
	_, envs2, err := NewSealer(r, "a").SealV2("s", 3, []byte(`{"type":"message"}`), 1024, (&keyStore{node: "a"}).publish)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(envs2[0], uint64(3))
	f.Fuzz(func(t *testing.T, env []byte, pos uint64) {
		plain, err := NewOpener(r).Open("a", tok, pos, [][]byte{env}, 1<<20)
		if err == nil && !bytes.Equal(env, envs[0]) {
			t.Fatalf("a forged envelope opened: %q", plain)
		}
	})
}

// misplaced is the envelopes of node "a"'s line at position 5 of session
// token tok, offered somewhere else or out of order.
type misplaced struct {
	name      string
	node, tok string
	pos       uint64
	envs      [][]byte
	want      error
}

// misplacedCases moves envs to another node, another session (token
// other), another position, and swaps, drops and repeats a chunk.
func misplacedCases(tok, other string, envs [][]byte) []misplaced {
	return []misplaced{
		{"another node", "b", tok, 5, envs, ErrMoved},
		{"another session", "a", other, 5, envs, ErrMoved},
		{"another position", "a", tok, 6, envs, ErrOpen},
		{"chunks swapped", "a", tok, 5, append([][]byte{envs[1], envs[0]}, envs[2:]...), ErrOpen},
		{"a chunk missing", "a", tok, 5, envs[:len(envs)-1], ErrOpen},
		{"a chunk twice", "a", tok, 5, append(cloneAll(envs), envs[0]), ErrOpen},
	}
}
