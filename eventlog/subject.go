package eventlog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Subject prefixes. A node is the only writer of its own subjects, so
// ordering per subject is total.
const (
	LocalPrefix = "pi.evt" // PI_LOCAL: pi.evt.<node>.<sid>
	UpPrefix    = "pi.up"  // PI_HUB: pi.up.<node>.<sid>
	AllPrefix   = "pi.all" // PI_ALL, a workstation's copy of PI_HUB: pi.all.<node>.<sid>
	KeyPrefix   = "pi.key" // PI_KEYS: pi.key.<node>.<token>, a sealed session's key messages
)

// KeySubject is the PI_KEYS subject of node's key messages for the
// session whose hub token is tok.
func KeySubject(node, tok string) string { return KeyPrefix + "." + node + "." + tok }

// encodedMark starts an encoded session id. It is outside pi's id alphabet
// [A-Za-z0-9._-], so a plain id never starts with it and decoding is
// unambiguous.
const encodedMark = "~"

// EncodeSID turns a session id into one NATS subject token, reversibly. Ids
// made of [A-Za-z0-9_-] (every UUID pi mints) stay readable; anything else,
// including a '.' (the token separator), wildcards, white space or an empty
// id, becomes "~" + unpadded base64url of the id.
func EncodeSID(sid string) string {
	if PlainToken(sid) {
		return sid
	}
	return encodedMark + base64.RawURLEncoding.EncodeToString([]byte(sid))
}

// MaxSIDToken bounds a session id's subject token (EncodeSID), and with it
// every subject and KV key built from a session id. NATS closes a
// connection whose protocol line is longer than max_control_line (4 KiB),
// and a publish carries its subject, a reply inbox and sizes on that line:
// a session id near 4,000 characters took the daemon's only connection,
// and with it every session, down. pi's own ids are UUIDs (36
// characters); 256 leaves room for any id chosen by hand and keeps every
// subject and key far below the limit.
const MaxSIDToken = 256

// ErrSIDTooLong marks a session id whose subject token is longer than
// MaxSIDToken: no subject or key is ever built from it.
var ErrSIDTooLong = errors.New("eventlog: session id too long for a subject")

// CheckSID reports whether sid may name a session in subjects and keys:
// its token (EncodeSID; a projection key token has the same length) is at
// most MaxSIDToken bytes. Every place that takes a session id from outside
// (a file's header, another machine's event, a query) checks it here
// before building a subject.
func CheckSID(sid string) error {
	if n := encodedLen(sid); n > MaxSIDToken {
		return fmt.Errorf("%w: a %d-byte id makes a %d-byte token, limit %d", ErrSIDTooLong, len(sid), n, MaxSIDToken)
	}
	return nil
}

// encodedLen is len(EncodeSID(sid)), without building it.
func encodedLen(sid string) int {
	if PlainToken(sid) {
		return len(sid)
	}
	return len(encodedMark) + base64.RawURLEncoding.EncodedLen(len(sid))
}

// DecodeSID reverses EncodeSID.
func DecodeSID(tok string) (string, error) {
	if !strings.HasPrefix(tok, encodedMark) {
		if !PlainToken(tok) {
			return "", fmt.Errorf("eventlog: invalid session token %q", tok)
		}
		return tok, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[len(encodedMark):])
	if err != nil {
		return "", fmt.Errorf("eventlog: invalid session token %q: %w", tok, err)
	}
	return string(b), nil
}

// PlainToken reports whether s is made of [A-Za-z0-9_-] only (and is not
// empty): safe verbatim as a subject token or a KV key token.
func PlainToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ValidNodeID reports whether id can be a node id: one subject token made of
// [A-Za-z0-9_-], at most 64 characters (it is also part of the JetStream
// domain and the server name).
func ValidNodeID(id string) bool { return PlainToken(id) && len(id) <= 64 }

// LocalSubject is the PI_LOCAL subject of a session written on node.
func LocalSubject(node, sid string) string {
	return LocalPrefix + "." + node + "." + EncodeSID(sid)
}

// UpSubject is the PI_HUB/PI_ALL subject of a session written on node.
func UpSubject(node, sid string) string {
	return UpPrefix + "." + node + "." + EncodeSID(sid)
}

// AllSubject is the PI_ALL subject of a session written on node.
func AllSubject(node, sid string) string {
	return AllPrefix + "." + node + "." + EncodeSID(sid)
}

// ParseSubject splits a pi.evt, pi.up or pi.all subject into its node and session id.
func ParseSubject(subj string) (node, sid string, err error) {
	var rest string
	switch {
	case strings.HasPrefix(subj, LocalPrefix+"."):
		rest = subj[len(LocalPrefix)+1:]
	case strings.HasPrefix(subj, UpPrefix+"."):
		rest = subj[len(UpPrefix)+1:]
	case strings.HasPrefix(subj, AllPrefix+"."):
		rest = subj[len(AllPrefix)+1:]
	default:
		return "", "", fmt.Errorf("eventlog: not an event subject: %q", subj)
	}
	node, tok, ok := strings.Cut(rest, ".")
	if !ok || node == "" || strings.Contains(tok, ".") {
		return "", "", fmt.Errorf("eventlog: malformed event subject: %q", subj)
	}
	sid, err = DecodeSID(tok)
	return node, sid, err
}
