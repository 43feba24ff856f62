package eventlog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Header names. Values are plain ASCII; ids are carried verbatim (pi ids are
// ASCII; anything else is percent-free JSON text and NATS headers are opaque
// bytes apart from CR/LF, which a JSON string cannot hold raw).
const (
	HdrID     = "Pi-Id"      // entry id ("" for id-less objects); the session id for a header line
	HdrParent = "Pi-Parent"  // parentId when it is a string
	HdrType   = "Pi-Type"    // entry type; "session" for a header line
	HdrSha    = "Pi-Sha"     // hex sha-256 of the whole line (all chunks joined)
	HdrChunk  = "Pi-Chunk"   // "i/n" (1-based) when the line is split
	HdrFile   = "Pi-File"    // the file's path relative to the sessions root
	HdrOff    = "Pi-Off"     // byte offset just past the line's '\n' in that file
	HdrOp     = "Pi-Op"      // set on control events, e.g. "delete" (tombstone)
	HdrSrcSeq = "Pi-Src-Seq" // on PI_HUB: the line's sequence in its node's PI_LOCAL
)

// OpDelete marks a tombstone: the origin node's file of the session was
// deleted. Control events carry the file in Pi-File and a small JSON object
// ({"op", "file", "time"}) as payload.
const OpDelete = "delete"

// OpRestore marks a session deleted before whose file is back on the
// origin node (restored from a trash, say): other nodes bring it back too.
const OpRestore = "restore"

// MaxChunk is the largest payload of one message. Lines above it are split
// into chunks published as one atomic batch; max_payload stays at 1 MiB so
// every server on a leaf path accepts the messages.
const MaxChunk = 256 << 10

// Line is one complete line of a session file, ready to publish.
type Line struct {
	Raw      []byte // the line without its '\n'
	Sha      [32]byte
	ID       string
	ParentID string
	Type     string
	File     string // path relative to the sessions root
	Off      int64  // offset just past the line's '\n'
	Op       string // a control event (OpDelete, OpRestore), not a line of the file
	SrcSeq   uint64 // on PI_HUB: the sequence in the origin's PI_LOCAL

	sealed [][]byte // a sealed line's envelopes (Crypt.seal): the line's messages carry these instead
}

// NewLine fills in the line's sha-256.
func NewLine(raw []byte, id, parent, typ, file string, off int64) Line {
	return Line{Raw: raw, Sha: sha256.Sum256(raw), ID: id, ParentID: parent, Type: typ, File: file, Off: off}
}

// Chunks reports how many messages the line takes.
func (l *Line) Chunks() int {
	if l.sealed != nil {
		return len(l.sealed)
	}
	if len(l.Raw) <= MaxChunk {
		return 1
	}
	return (len(l.Raw) + MaxChunk - 1) / MaxChunk
}

// size is about the bytes the line's messages carry: their payloads.
func (l *Line) size() int {
	if l.sealed == nil {
		return len(l.Raw)
	}
	n := 0
	for _, e := range l.sealed {
		n += len(e)
	}
	return n
}

// messages builds the line's messages for subj. They carry no
// Nats-Msg-Id: a retry after a lost ack is refused by the expected last
// subject sequence every publish states, and the publisher reads the
// subject's end again. On the hub an id was worse than useless: the server
// drops a message whose id it saw anywhere in the stream within its
// duplicate window and answers as if it had stored it, so a node that
// guessed another's next ids (a sealed line's was its subject and
// position, both readable by the team) had the hub drop those lines.
func (l *Line) messages(subj string) []*nats.Msg {
	if l.sealed != nil {
		return l.sealedMessages(subj)
	}
	n := l.Chunks()
	msgs := make([]*nats.Msg, 0, n)
	sha := hex.EncodeToString(l.Sha[:])
	vals := make(headerValues, 0, lineHeaders*n)
	for i := 0; i < n; i++ {
		lo, hi := i*MaxChunk, min((i+1)*MaxChunk, len(l.Raw))
		m := newLineMsg(subj)
		m.Data = l.Raw[lo:hi]
		h := m.Header
		vals.set(h, HdrID, HeaderValue(l.ID))
		if l.ParentID != "" {
			vals.set(h, HdrParent, HeaderValue(l.ParentID))
		}
		if l.Type != "" {
			vals.set(h, HdrType, HeaderValue(l.Type))
		}
		vals.set(h, HdrSha, sha)
		if l.File != "" {
			vals.set(h, HdrFile, l.File)
		}
		if l.Off > 0 {
			vals.set(h, HdrOff, strconv.FormatInt(l.Off, 10))
		}
		if l.Op != "" {
			vals.set(h, HdrOp, l.Op)
		}
		if l.SrcSeq > 0 {
			vals.set(h, HdrSrcSeq, strconv.FormatUint(l.SrcSeq, 10))
		}
		if n > 1 {
			vals.set(h, HdrChunk, strconv.Itoa(i+1)+"/"+strconv.Itoa(n))
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// lineHeaders is the most headers a line's message carries: its Pi-*
// headers (id, parent, type, sha, file, offset, op, source sequence,
// chunk), and the four of an atomic batch. (A map made for
// one more takes a table twice the size.)
const lineHeaders = 13

// newLineMsg is nats.NewMsg with the header map made for lineHeaders
// entries: a map made empty holds eight before it grows into a table, and
// a line's message in a batch carries 9 to 12 (with nats.Header.Set's
// slice per value, ~4% of a first read's CPU in a profile).
func newLineMsg(subj string) *nats.Msg {
	return &nats.Msg{Subject: subj, Header: make(nats.Header, lineHeaders)}
}

// headerValues hands out header values cut from one array, for all the
// messages of a line or a batch: nats.Header.Set allocates a slice for
// each. Each value's slice is capped at its length, so appending to one
// cannot reach the next.
type headerValues []string

// HeaderValue is s as a header of a line's messages carries it: as it is,
// or Go-quoted when a NATS header would not carry it whole (nats.go trims
// white space from a value's ends and turns CR and LF into spaces) or when
// it begins with a quote. An entry id, parent id or type is any JSON
// string: one holding "\r\n" arrived in another form than its line's,
// and every other machine refused it with the lines below it (a files
// probe, 2026-12-07); a form that only trimmed and replaced them merged
// ids pi keeps apart ("dup" and "dup ", a verifying probe the same day).
// fromHeader reads it back.
func HeaderValue(s string) string {
	if s != "" && (s[0] == '"' || textproto.TrimString(s) != s || strings.ContainsAny(s, "\r\n")) {
		return strconv.Quote(s)
	}
	return s
}

// fromHeader is the string HeaderValue gave v for.
func fromHeader(v string) string {
	if len(v) >= 2 && v[0] == '"' {
		if s, err := strconv.Unquote(v); err == nil {
			return s
		}
	}
	return v
}

// set sets h's header key to value.
func (v *headerValues) set(h nats.Header, key, value string) {
	*v = append(*v, value)
	n := len(*v)
	h[key] = (*v)[n-1 : n : n]
}

// sealedMessages are a sealed line's messages: the envelopes, and only
// the headers the hub needs (HdrSeal).
func (l *Line) sealedMessages(subj string) []*nats.Msg {
	n := len(l.sealed)
	msgs := make([]*nats.Msg, 0, n)
	for i, env := range l.sealed {
		m := nats.NewMsg(subj)
		m.Data = env
		h := m.Header
		h.Set(HdrSeal, strconv.Itoa(int(env[0])))
		if l.Op == OpErase {
			h.Set(HdrOp, l.Op)
		}
		h.Set(HdrSrcSeq, strconv.FormatUint(l.SrcSeq, 10))
		if n > 1 {
			h.Set(HdrChunk, strconv.Itoa(i+1)+"/"+strconv.Itoa(n))
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// ParseSha decodes a Pi-Sha header value.
func ParseSha(s string) ([32]byte, error) {
	var sha [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(sha) {
		return sha, fmt.Errorf("eventlog: bad %s %q", HdrSha, s)
	}
	copy(sha[:], b)
	return sha, nil
}

// ParseChunk decodes a Pi-Chunk header value; "" means a whole line (1/1).
func ParseChunk(s string) (i, n int, err error) {
	if s == "" {
		return 1, 1, nil
	}
	a, b, ok := strings.Cut(s, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || i < 1 || n < 1 || i > n {
		return 0, 0, fmt.Errorf("eventlog: bad %s %q", HdrChunk, s)
	}
	return i, n, nil
}

// OpErase asks every machine to remove a session: its files and every
// line of it in the streams (a leaked secret). Pi-File and payload as for
// OpDelete.
const OpErase = "erase"
