package keyring

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The export form is a short text block a person can copy between
// machines: the keyring in binary, with a 4-byte checksum, in base32
// groups of four between two marker lines. Base32 survives any terminal,
// mail or chat, and has no look-alike pairs in upper case; the checksum
// turns a typo into a clear refusal rather than a wrong key.
const (
	exportBegin = "-----BEGIN PISYNC TEAM KEY-----"
	exportEnd   = "-----END PISYNC TEAM KEY-----"
	exportV1    = 1
)

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrBadExport: the text is not an intact export block.
var ErrBadExport = errors.New("keyring: not an intact team key block")

// Export renders r in the export form.
func Export(r *Ring) string {
	var b bytes.Buffer
	team, _ := hex.DecodeString(r.Team)
	b.WriteByte(exportV1)
	b.Write(team)
	b.Write(r.IDKey)
	b.WriteByte(byte(len(r.Keys)))
	cur := 0
	for i, k := range r.Keys {
		b.Write(binary.BigEndian.AppendUint64(nil, uint64(k.Created.Unix())))
		b.Write(k.Secret)
		if k.ID == r.Current {
			cur = i
		}
	}
	b.WriteByte(byte(cur))
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:4])
	text := b32.EncodeToString(b.Bytes())
	var out strings.Builder
	out.WriteString(exportBegin + "\n")
	for i := 0; i < len(text); i += 4 {
		out.WriteString(text[i:min(i+4, len(text))])
		switch {
		case i+4 >= len(text):
			out.WriteString("\n")
		case (i/4)%8 == 7:
			out.WriteString("\n")
		default:
			out.WriteString("-")
		}
	}
	out.WriteString(exportEnd + "\n")
	return out.String()
}

// Import reads an export block (marker lines optional; white space,
// dashes and case do not matter).
func Import(text string) (*Ring, error) {
	body := text
	if i := strings.Index(body, exportBegin); i >= 0 {
		body = body[i+len(exportBegin):]
	}
	if i := strings.Index(body, exportEnd); i >= 0 {
		body = body[:i]
	}
	body = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r', '-':
			return -1
		}
		return r
	}, strings.ToUpper(body))
	if body == "" {
		return nil, fmt.Errorf("%w: it is empty", ErrBadExport)
	}
	b, err := b32.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (check for a typo)", ErrBadExport, err)
	}
	if len(b) < 1+8+KeySize+1+8+KeySize+1+4 {
		return nil, fmt.Errorf("%w: too short (%d bytes; part of it is missing?)", ErrBadExport, len(b))
	}
	data, sum := b[:len(b)-4], b[len(b)-4:]
	if want := sha256.Sum256(data); !bytes.Equal(want[:4], sum) {
		return nil, fmt.Errorf("%w: the checksum does not match (check for a typo)", ErrBadExport)
	}
	if data[0] != exportV1 {
		return nil, fmt.Errorf("%w: version %d, this pisyncd knows %d", ErrBadExport, data[0], exportV1)
	}
	r := &Ring{Version: 1, Team: hex.EncodeToString(data[1:9]), IDKey: bytes.Clone(data[9 : 9+KeySize])}
	p := data[9+KeySize:]
	n := int(p[0])
	p = p[1:]
	if len(p) != n*(8+KeySize)+1 {
		return nil, fmt.Errorf("%w: %d keys do not fit its length", ErrBadExport, n)
	}
	for i := 0; i < n; i++ {
		created := time.Unix(int64(binary.BigEndian.Uint64(p)), 0)
		r.add(bytes.Clone(p[8:8+KeySize]), created)
		p = p[8+KeySize:]
	}
	if int(p[0]) >= n {
		return nil, fmt.Errorf("%w: current key %d of %d", ErrBadExport, p[0], n)
	}
	r.Current = r.Keys[p[0]].ID
	return r, r.Check()
}
