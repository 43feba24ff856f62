// Package seal is the envelope format of end-to-end encryption: what a
// workstation makes of a line before it goes to the hub, and opens after
// it comes back. Pure: bytes in, bytes out, keys from a keyring.Ring.
//
// Each session of each origin node gets a random data key, wrapped by the
// team's current key; a payload is compressed (s2), cut into chunks that
// fit a hub message, and each chunk is sealed with XChaCha20-Poly1305 under
// the data key. The associated data binds team, origin node, session
// (its keyed-hash token), the line's position (its PI_LOCAL sequence) and
// the chunk's i/n: the hub cannot move, replay or reorder ciphertext
// without the opening failing.
//
// One envelope (one hub message):
//
//	version (1) | team key id (8) | wrap nonce (24) | wrapped data key (48)
//	| nonce (24) | ciphertext with tag
//
// Version 1 envelopes (history) carry their wrapped data key, so each hub
// message opens on its own, and the key lives as long as the ciphertext.
// Version 2 envelopes carry instead a handle: the hub sequence of a key
// message that holds the wrapped data key, published once per data key
// (SealV2). Removing the key message (an erase) makes every envelope
// that names it unreadable, wherever the ciphertext stays:
//
//	key message:  version (2) | team key id (8) | wrap nonce (24) | wrapped data key (48)
//	envelope:     version (2) | handle (8) | nonce (24) | ciphertext with tag
package seal

import (
	"bytes"
	"container/list"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/klauspost/compress/s2"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/pisyncd/pisyncd/keyring"
)

// Version is the first byte of an envelope that carries its wrapped key.
const Version = 1

// Version2 is the first byte of an envelope that names its key message by
// handle, and of a key message.
const Version2 = 2

const (
	kidLen     = 8
	wrappedLen = keyring.KeySize + chacha20poly1305.Overhead
	headLen    = 1 + kidLen + chacha20poly1305.NonceSizeX + wrappedLen
)

// Overhead is what sealing adds to each chunk (the larger of the two
// formats).
const Overhead = headLen + chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead

const (
	head2Len = 1 + 8 // version | handle
	// Overhead2 is what a version 2 envelope adds to each chunk.
	Overhead2 = head2Len + chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead
	// KeyMsgLen is the size of a key message.
	KeyMsgLen = headLen
)

// Errors of Open. A caller tells them apart with errors.Is.
var (
	// ErrNoKey: the envelope was sealed with a team key this keyring does
	// not hold (a newer key, another team's, or no keyring at all). The
	// data is fine; this machine must wait for the key.
	ErrNoKey = errors.New("seal: no team key for this envelope")
	// ErrMoved: the data key was wrapped for another node or session than
	// the one the envelope arrived on.
	ErrMoved = errors.New("seal: sealed for another node or session")
	// ErrOpen: the envelope does not open (tampered, reordered, truncated
	// or malformed).
	ErrOpen = errors.New("seal: does not open")
	// ErrNeedKey: a version 2 envelope names a key message this opener
	// has not been given (AddKey); the error is a *NeedKeyError.
	ErrNeedKey = errors.New("seal: key message needed")
)

// NeedKeyError names the key message (its handle) an envelope needs.
type NeedKeyError struct{ Handle uint64 }

func (e *NeedKeyError) Error() string {
	return fmt.Sprintf("seal: key message %d needed", e.Handle)
}
func (e *NeedKeyError) Unwrap() error { return ErrNeedKey }

// NoKeyError names the key an envelope needs.
type NoKeyError struct{ KeyID string }

func (e *NoKeyError) Error() string { return fmt.Sprintf("seal: no team key %s here", e.KeyID) }
func (e *NoKeyError) Unwrap() error { return ErrNoKey }

var tokenEnc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Token is the keyed hash of a session id the hub sees instead of the id:
// "h" and 32 base32 digits (160 bits of HMAC-SHA256 under the team's id
// key), a valid subject token. The same session always has the same
// token, so the hub still orders and deduplicates per session.
func Token(r *keyring.Ring, sid string) string {
	m := hmac.New(sha256.New, r.IDKey)
	m.Write([]byte("pisyncd/sid/v1\x00"))
	m.Write([]byte(sid))
	return "h" + tokenEnc.EncodeToString(m.Sum(nil)[:20])
}

// aad is the associated data: a label, then length-prefixed fields, so no
// two field lists encode alike.
func aad(label string, fields ...[]byte) []byte {
	b := []byte(label)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func wrapAAD(team, kid, node, tok string) []byte {
	return aad("pisyncd/dk/v1", []byte(team), []byte(kid), []byte(node), []byte(tok))
}

func lineAAD(team, node, tok string, pos uint64, i, n int) []byte {
	return aad("pisyncd/line/v1", []byte(team), []byte(node), []byte(tok), u64(pos), u64(uint64(i)), u64(uint64(n)))
}

func line2AAD(team, node, tok string, handle, pos uint64, i, n int) []byte {
	return aad("pisyncd/line/v2", []byte(team), []byte(node), []byte(tok), u64(handle), u64(pos), u64(uint64(i)), u64(uint64(n)))
}

func newAEAD(key []byte) cipher.AEAD {
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		panic("seal: " + err.Error()) // only a wrong key size, which the keyring rules out
	}
	return a
}

func random(b []byte) {
	if _, err := rand.Read(b); err != nil {
		panic("seal: no randomness: " + err.Error())
	}
}

// dataKey is one session's data key and its envelope head.
type dataKey struct {
	kid    string
	aead   cipher.AEAD
	head   []byte // version | key id | wrap nonce | wrapped key
	handle uint64 // its key message's hub sequence, 0 until published
}

// Sealer seals one origin node's payloads. It keeps a data key per
// session, made when the session's first payload is sealed and again
// after the team key changed. Not safe for concurrent use.
type Sealer struct {
	ring *keyring.Ring
	node string
	keys map[string]*dataKey // by token
}

// NewSealer seals for node with r's current key.
func NewSealer(r *keyring.Ring, node string) *Sealer {
	return &Sealer{ring: r, node: node, keys: map[string]*dataKey{}}
}

// SetRing makes r the keyring (after an import or a rotation): sessions
// get a new data key under r's current key at their next payload.
func (s *Sealer) SetRing(r *keyring.Ring) { s.ring = r }

// Ring is the keyring in use.
func (s *Sealer) Ring() *keyring.Ring { return s.ring }

// Forget drops a session's data key (an erase): its next payload, if any,
// gets a new one.
func (s *Sealer) Forget(sid string) { delete(s.keys, Token(s.ring, sid)) }

// ForgetAll drops every session's data key: each next payload gets a new
// one, and its key message is published again.
func (s *Sealer) ForgetAll() { clear(s.keys) }

func (s *Sealer) dataKey(tok string) *dataKey {
	cur := s.ring.CurrentKey()
	if dk := s.keys[tok]; dk != nil && dk.kid == cur.ID {
		return dk
	}
	key := make([]byte, keyring.KeySize)
	random(key)
	kid, _ := hex.DecodeString(cur.ID)
	head := make([]byte, 0, headLen)
	head = append(head, Version)
	head = append(head, kid...)
	wnonce := make([]byte, chacha20poly1305.NonceSizeX)
	random(wnonce)
	head = append(head, wnonce...)
	head = newAEAD(cur.Secret).Seal(head, wnonce, key, wrapAAD(s.ring.Team, cur.ID, s.node, tok))
	dk := &dataKey{kid: cur.ID, aead: newAEAD(key), head: head}
	s.keys[tok] = dk
	return dk
}

// PublishKey publishes the key message of a new data key of the session
// whose token is tok, and returns its handle (its hub sequence, never 0).
type PublishKey func(tok string, keyMsg []byte) (uint64, error)

// SealV2 is Seal in the version 2 format: when the session's data key is
// new, its key message (version 2, key id, wrap nonce, wrapped key) is
// published first, and every envelope names it by the handle publish
// returns. A failed publish leaves no key behind: the next call draws a
// new one.
func (s *Sealer) SealV2(sid string, pos uint64, plain []byte, maxChunk int, publish PublishKey) (string, [][]byte, error) {
	tok := Token(s.ring, sid)
	dk := s.dataKey(tok)
	if dk.handle == 0 {
		msg := append([]byte{Version2}, dk.head[1:]...)
		h, err := publish(tok, msg)
		if err == nil && h == 0 {
			err = errors.New("handle 0")
		}
		if err != nil {
			delete(s.keys, tok)
			return "", nil, fmt.Errorf("seal: publish key message: %w", err)
		}
		dk.handle = h
	}
	c := s2.Encode(nil, plain)
	per := maxChunk - Overhead2
	n := max(1, (len(c)+per-1)/per)
	out := make([][]byte, n)
	for i := range n {
		piece := c[i*per : min((i+1)*per, len(c))]
		env := make([]byte, 0, Overhead2+len(piece))
		env = append(env, Version2)
		env = binary.BigEndian.AppendUint64(env, dk.handle)
		nonce := make([]byte, chacha20poly1305.NonceSizeX)
		random(nonce)
		env = append(env, nonce...)
		out[i] = dk.aead.Seal(env, nonce, piece, line2AAD(s.ring.Team, s.node, tok, dk.handle, pos, i+1, n))
	}
	return tok, out, nil
}

// Handle returns the key message handle a version 2 envelope names.
func Handle(env []byte) (uint64, bool) {
	if len(env) < Overhead2 || env[0] != Version2 {
		return 0, false
	}
	return binary.BigEndian.Uint64(env[1:head2Len]), true
}

// Seal compresses plain and seals it for session sid at position pos, in
// chunks of at most maxChunk bytes each. It returns the session's token
// and the envelopes.
func (s *Sealer) Seal(sid string, pos uint64, plain []byte, maxChunk int) (string, [][]byte) {
	tok := Token(s.ring, sid)
	dk := s.dataKey(tok)
	c := s2.Encode(nil, plain)
	per := maxChunk - Overhead
	n := max(1, (len(c)+per-1)/per)
	out := make([][]byte, n)
	for i := range n {
		piece := c[i*per : min((i+1)*per, len(c))]
		env := make([]byte, 0, Overhead+len(piece))
		env = append(env, dk.head...)
		nonce := make([]byte, chacha20poly1305.NonceSizeX)
		random(nonce)
		env = append(env, nonce...)
		out[i] = dk.aead.Seal(env, nonce, piece, lineAAD(s.ring.Team, s.node, tok, pos, i+1, n))
	}
	return tok, out
}

// Opener opens envelopes with a keyring, keeping the data keys it
// unwrapped. Not safe for concurrent use.
type Opener struct {
	ring  *keyring.Ring // nil: no keyring, every envelope is ErrNoKey
	cache map[string]*list.Element
	lru   list.List // of *cached, most recently used first
}

type cached struct {
	key  string
	aead cipher.AEAD
}

// maxCached bounds the unwrapped data keys kept; past it the least
// recently used goes (a version 2 key costs a request to the hub again).
const maxCached = 4096

// NewOpener opens with r (nil: no keyring yet).
func NewOpener(r *keyring.Ring) *Opener {
	return &Opener{ring: r, cache: map[string]*list.Element{}}
}

// SetRing makes r the keyring (after an import or a rotation).
func (o *Opener) SetRing(r *keyring.Ring) {
	o.ring = r
	clear(o.cache)
	o.lru.Init()
}

// get returns a cached data key, marking it used.
func (o *Opener) get(k string) cipher.AEAD {
	e := o.cache[k]
	if e == nil {
		return nil
	}
	o.lru.MoveToFront(e)
	return e.Value.(*cached).aead
}

// Ring is the keyring in use (nil: none).
func (o *Opener) Ring() *keyring.Ring { return o.ring }

// Forget drops the unwrapped data keys of a session (an erase).
func (o *Opener) Forget(sid string) {
	if o.ring == nil {
		return
	}
	tok := Token(o.ring, sid)
	for k, e := range o.cache {
		if strings.Contains(k, "\x00"+tok+"\x00") {
			o.lru.Remove(e)
			delete(o.cache, k)
		}
	}
}

// Open opens the envelopes of one payload sealed by node for the session
// whose token is tok, at position pos, and returns the payload. maxLen
// bounds the payload (a decompression bomb is refused before it is
// decompressed).
func (o *Opener) Open(node, tok string, pos uint64, envs [][]byte, maxLen int) ([]byte, error) {
	if len(envs) == 0 {
		return nil, fmt.Errorf("%w: no envelope", ErrOpen)
	}
	if len(envs[0]) > 0 && envs[0][0] == Version2 {
		return o.open2(node, tok, pos, envs, maxLen)
	}
	var c []byte
	for i, env := range envs {
		if len(env) < Overhead || env[0] != Version {
			return nil, fmt.Errorf("%w: not a version %d envelope", ErrOpen, Version)
		}
		if i > 0 && !bytes.Equal(env[:headLen], envs[0][:headLen]) {
			return nil, fmt.Errorf("%w: chunk %d/%d has another data key", ErrOpen, i+1, len(envs))
		}
		a, err := o.dataKey(node, tok, env[:headLen])
		if err != nil {
			return nil, err
		}
		nonce := env[headLen : headLen+chacha20poly1305.NonceSizeX]
		c, err = a.Open(c, nonce, env[headLen+chacha20poly1305.NonceSizeX:], lineAAD(o.ring.Team, node, tok, pos, i+1, len(envs)))
		if err != nil {
			return nil, fmt.Errorf("%w: chunk %d/%d at position %d", ErrOpen, i+1, len(envs), pos)
		}
	}
	return decode(c, maxLen)
}

// open2 opens version 2 envelopes: every chunk names the same handle.
func (o *Opener) open2(node, tok string, pos uint64, envs [][]byte, maxLen int) ([]byte, error) {
	h, a, err := o.key2(node, tok, envs[0])
	if err != nil {
		return nil, err
	}
	var c []byte
	for i, env := range envs {
		if h2, ok := Handle(env); !ok || h2 != h {
			return nil, fmt.Errorf("%w: chunk %d/%d has another data key", ErrOpen, i+1, len(envs))
		}
		if c, err = o.chunk2(c, a, node, tok, h, pos, env, i+1, len(envs)); err != nil {
			return nil, err
		}
	}
	return decode(c, maxLen)
}

// key2 is the data key the version 2 envelope env names, with its key
// message's handle: ErrOpen for another form, NoKeyError without a
// keyring, NeedKeyError for a key message not given yet (AddKey).
func (o *Opener) key2(node, tok string, env []byte) (uint64, cipher.AEAD, error) {
	h, ok := Handle(env)
	switch {
	case !ok || h == 0:
		return 0, nil, fmt.Errorf("%w: not a version %d envelope", ErrOpen, Version2)
	case o.ring == nil:
		return 0, nil, &NoKeyError{KeyID: "(key message " + fmt.Sprint(h) + ")"}
	}
	a := o.get(handleKey(node, tok, h))
	if a == nil {
		return 0, nil, &NeedKeyError{Handle: h}
	}
	return h, a, nil
}

// chunk2 appends to c the opened chunk i of n, env, under data key a of
// key message h.
func (o *Opener) chunk2(c []byte, a cipher.AEAD, node, tok string, h, pos uint64, env []byte, i, n int) ([]byte, error) {
	nonce := env[head2Len : head2Len+chacha20poly1305.NonceSizeX]
	c, err := a.Open(c, nonce, env[head2Len+chacha20poly1305.NonceSizeX:], line2AAD(o.ring.Team, node, tok, h, pos, i, n))
	if err != nil {
		return nil, fmt.Errorf("%w: chunk %d/%d at position %d", ErrOpen, i, n, pos)
	}
	return c, nil
}

// Check reports whether env is chunk i of n of a payload node sealed for
// the session of token tok at position pos, without opening the rest. A
// position or session claimed for a chunk sealed for another, or a chunk
// made up, fails it (ErrOpen). Only version 2 envelopes are checked (the
// version 1 form is read, never written, and carries its key); a
// *NeedKeyError asks for the key message the chunk names (AddKey).
func (o *Opener) Check(node, tok string, pos uint64, env []byte, i, n int) error {
	h, a, err := o.key2(node, tok, env)
	if err != nil {
		return err
	}
	_, err = o.chunk2(nil, a, node, tok, h, pos, env, i, n)
	return err
}

func handleKey(node, tok string, h uint64) string {
	return node + "\x00" + tok + "\x00h" + string(u64(h))
}

// AddKey unwraps the key message of handle h, sealed by node for the
// session whose token is tok, and keeps its data key for Open. The caller
// checked the message was stored on that node's key subject of tok; the
// wrap's associated data binds both again. ErrNoKey: the team key is not
// here; ErrMoved: it does not open for node and tok; ErrOpen: malformed.
func (o *Opener) AddKey(node, tok string, h uint64, msg []byte) error {
	if len(msg) != KeyMsgLen || msg[0] != Version2 {
		return fmt.Errorf("%w: not a key message", ErrOpen)
	}
	head := append([]byte{Version}, msg[1:]...)
	a, err := o.unwrap(node, tok, head)
	if err != nil {
		return err
	}
	o.put(handleKey(node, tok, h), a)
	return nil
}

func (o *Opener) put(k string, a cipher.AEAD) {
	if e := o.cache[k]; e != nil {
		e.Value.(*cached).aead = a
		o.lru.MoveToFront(e)
		return
	}
	if len(o.cache) >= maxCached {
		old := o.lru.Back()
		o.lru.Remove(old)
		delete(o.cache, old.Value.(*cached).key)
	}
	o.cache[k] = o.lru.PushFront(&cached{key: k, aead: a})
}

// decode decompresses an opened payload of at most maxLen bytes.
func decode(c []byte, maxLen int) ([]byte, error) {
	n, err := s2.DecodedLen(c)
	if err != nil || n > maxLen {
		return nil, fmt.Errorf("%w: payload of %d bytes (at most %d): %v", ErrOpen, n, maxLen, err)
	}
	plain, err := s2.Decode(make([]byte, n), c)
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", ErrOpen, err)
	}
	return plain, nil
}

func (o *Opener) dataKey(node, tok string, head []byte) (cipher.AEAD, error) {
	ck := node + "\x00" + tok + "\x00" + string(head)
	if a := o.get(ck); a != nil {
		return a, nil
	}
	a, err := o.unwrap(node, tok, head)
	if err != nil {
		return nil, err
	}
	o.put(ck, a)
	return a, nil
}

// unwrap opens a wrapped data key (head: version 1 | key id | wrap nonce |
// wrapped key).
func (o *Opener) unwrap(node, tok string, head []byte) (cipher.AEAD, error) {
	kid := hex.EncodeToString(head[1 : 1+kidLen])
	if o.ring == nil {
		return nil, &NoKeyError{KeyID: kid}
	}
	k, ok := o.ring.Key(kid)
	if !ok {
		return nil, &NoKeyError{KeyID: kid}
	}
	wnonce := head[1+kidLen : 1+kidLen+chacha20poly1305.NonceSizeX]
	key, err := newAEAD(k.Secret).Open(nil, wnonce, head[1+kidLen+chacha20poly1305.NonceSizeX:], wrapAAD(o.ring.Team, kid, node, tok))
	if err != nil {
		return nil, fmt.Errorf("%w: its data key does not open for node %s, session %s", ErrMoved, node, tok)
	}
	return newAEAD(key), nil
}
