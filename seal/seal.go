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
// Every envelope carries its wrapped data key, so each hub message opens
// on its own, and deleting the message deletes that copy of the key.
package seal

import (
	"bytes"
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

// Version is the envelope format's first byte.
const Version = 1

const (
	kidLen     = 8
	wrappedLen = keyring.KeySize + chacha20poly1305.Overhead
	headLen    = 1 + kidLen + chacha20poly1305.NonceSizeX + wrappedLen
)

// Overhead is what sealing adds to each chunk.
const Overhead = headLen + chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead

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
)

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
	kid  string
	aead cipher.AEAD
	head []byte // version | key id | wrap nonce | wrapped key
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
	cache map[string]cipher.AEAD
}

// maxCached bounds the unwrapped data keys kept: past it the cache starts
// over (an unwrap costs about a microsecond).
const maxCached = 4096

// NewOpener opens with r (nil: no keyring yet).
func NewOpener(r *keyring.Ring) *Opener { return &Opener{ring: r, cache: map[string]cipher.AEAD{}} }

// SetRing makes r the keyring (after an import or a rotation).
func (o *Opener) SetRing(r *keyring.Ring) {
	o.ring = r
	clear(o.cache)
}

// Ring is the keyring in use (nil: none).
func (o *Opener) Ring() *keyring.Ring { return o.ring }

// Forget drops the unwrapped data keys of a session (an erase).
func (o *Opener) Forget(sid string) {
	if o.ring == nil {
		return
	}
	tok := Token(o.ring, sid)
	for k := range o.cache {
		if strings.Contains(k, "\x00"+tok+"\x00") {
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
	kid := hex.EncodeToString(head[1 : 1+kidLen])
	ck := node + "\x00" + tok + "\x00" + string(head)
	if a := o.cache[ck]; a != nil {
		return a, nil
	}
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
	if len(o.cache) >= maxCached {
		clear(o.cache)
	}
	a := newAEAD(key)
	o.cache[ck] = a
	return a, nil
}
