package eventlog

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// decodeInner reads a sealed line's inner headers. Every sealed line is
// opened through it on the way into PI_ALL, and encoding/json's
// reflection was the largest cost of opening one after the cipher itself.
// It reads the form json.Marshal gives an inner (its fields in order,
// none escaped) directly, and leaves anything else (escapes, other
// spacing or order, another writer's JSON) to json.Unmarshal, so it
// accepts what json.Unmarshal accepts and decodes it the same way
// (FuzzDecodeInner).
func decodeInner(b []byte, in *inner) error {
	if decodeInnerFast(b, in) {
		return nil
	}
	*in = inner{}
	return json.Unmarshal(b, in)
}

// decodeInnerFast decodes b when it is in json.Marshal's plain form,
// reporting whether it was.
func decodeInnerFast(b []byte, in *inner) bool {
	*in = inner{}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	b = b[1 : len(b)-1]
	fields := []struct {
		key string
		str *string
		num *int64
	}{
		{`"sid":`, &in.SID, nil}, {`"id":`, &in.ID, nil}, {`"parent":`, &in.Parent, nil},
		{`"type":`, &in.Type, nil}, {`"file":`, &in.File, nil}, {`"off":`, nil, &in.Off},
		{`"op":`, &in.Op, nil}, {`"sha":`, &in.Sha, nil},
	}
	seen := false
	for _, f := range fields {
		rest := b
		if seen {
			if len(rest) == 0 || rest[0] != ',' {
				continue
			}
			rest = rest[1:]
		}
		if !bytes.HasPrefix(rest, []byte(f.key)) {
			continue // omitted (omitempty), or not the plain form
		}
		rest = rest[len(f.key):]
		var ok bool
		if f.str != nil {
			*f.str, rest, ok = plainString(rest)
		} else {
			*f.num, rest, ok = plainInt(rest)
		}
		if !ok {
			return false
		}
		b, seen = rest, true
	}
	return seen && len(b) == 0
}

// plainString reads a JSON string with no escapes, no control characters
// and valid UTF-8 (what json.Unmarshal takes as it is) at the start of b.
func plainString(b []byte) (string, []byte, bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			s := b[1:i]
			if !utf8.Valid(s) {
				return "", b, false
			}
			return string(s), b[i+1:], true
		case c == '\\' || c < 0x20:
			return "", b, false
		}
	}
	return "", b, false
}

// plainInt reads a JSON integer as json.Marshal writes one: an optional
// minus, then digits without a leading zero.
func plainInt(b []byte) (int64, []byte, bool) {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, b, false
	}
	v, err := strconv.ParseInt(string(b[:i]), 10, 64)
	if err != nil {
		return 0, b, false
	}
	return v, b[i:], true
}

// tokens caches the keyed hash of session ids (seal.Token, an HMAC) for
// one keyring: the downloader checks every sealed line's session against
// its subject, and most lines are of a few sessions.
type tokens struct {
	ring *keyring.Ring
	m    map[string]string
}

// maxTokens bounds the cache; past it, it starts again.
const maxTokens = 4096

func (t *tokens) get(r *keyring.Ring, sid string) string {
	if t.ring != r || len(t.m) >= maxTokens {
		t.ring, t.m = r, make(map[string]string)
	}
	tok, ok := t.m[sid]
	if !ok {
		tok = seal.Token(r, sid)
		t.m[sid] = tok
	}
	return tok
}
