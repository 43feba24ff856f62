package session

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
)

// A context can be far larger than what a reader wants to hold: a 200 MB
// session has a 200 MB context. Index.EachMessage and Index.WriteContext produce it
// one window entry at a time, asking src for each body when its messages
// are due (in the order of Index.Refs, once each), so that nothing holds
// more than one entry's body and messages at once unless src keeps them.

// EachMessage calls emit with each message of the index's context, in
// order. Bodies are asked of src in the order of ix.Refs, one window entry
// (and the context_edit that applies to it) at a time; a message passed
// to emit may alias its body and is only valid during the call unless src
// keeps the body.
//
// The Index holds what it needs of its tree: it may be used while the tree
// takes more lines (not concurrently with them), and without it.
func (ix *Index) EachMessage(src BodySource, emit func(json.RawMessage) error) error {
	var msgs []json.RawMessage
	for k := range ix.wins {
		var err error
		if msgs, err = ix.winMessages(msgs[:0], k, src); err != nil {
			return err
		}
		for _, m := range msgs {
			if err := emit(m); err != nil {
				return err
			}
		}
		clear(msgs) // no reference to this body outlives the entry
	}
	return nil
}

// winMessages appends to msgs the messages of window entry k, its
// context_edit applied.
func (ix *Index) winMessages(msgs []json.RawMessage, k int, src BodySource) ([]json.RawMessage, error) {
	w := ix.wins[k]
	n := &ix.nodes[w.n]
	body, err := src.Body(n.ref)
	if err != nil {
		return msgs, fmt.Errorf("session: body of entry %d: %w", n.ref, err)
	}
	if msgs, err = entryMessages(msgs, n, body, ix.Rules, ix.version); err != nil {
		return msgs, err
	}
	if w.edit >= 0 {
		e := &ix.nodes[w.edit]
		eb, err := src.Body(e.ref)
		if err != nil {
			return msgs, fmt.Errorf("session: body of entry %d: %w", e.ref, err)
		}
		if err := editMessages(msgs, eb); err != nil {
			return msgs, err
		}
	}
	return msgs, nil
}

// WriteContext writes the context of ix to w exactly as json.Marshal of
// the built Context writes it (values compacted, <, >, & and U+2028/9
// escaped), message by message (EachMessage). On an error it stops; what
// was written is then no valid document.
func (ix *Index) WriteContext(w io.Writer, src BodySource) error {
	return ix.writeContext(w, src, renderChunk)
}

// writeContext is WriteContext with the bodies of a source safe for
// concurrent use rendered on two goroutines in chunks of about chunk bytes
// (render_chunks.go).
func (ix *Index) writeContext(w io.Writer, src BodySource, chunk int) error {
	out := &marshalOut{w: bufio.NewWriterSize(w, 64<<10)}
	writeHead(out, ix.LeafID, ix.EntryIDs)
	var bounds []int
	if concurrentBodies(src) && runtime.GOMAXPROCS(0) > 1 {
		bounds = ix.renderChunks(src, chunk)
	}
	var err error
	if bounds != nil {
		err = ix.writeMessagesOnTwo(out.w, src, bounds)
	} else {
		first := true
		_, err = ix.writeMessages(out.w, src, 0, len(ix.wins), nil, &first)
	}
	if err != nil {
		return err
	}
	writeTail(out, ix.ThinkingLevel, ix.Model)
	if out.err != nil {
		return out.err
	}
	return out.w.Flush()
}

// writeMessages writes to dst the messages of window entries [lo, hi),
// each as marshalOut.val writes a value, after a comma unless it is the
// context's first (*first, cleared by the first one written). It stops at
// the first error, of a body or of dst (a bufio.Writer keeps its first; an
// empty write reads it), and returns msgs to be used again.
func (ix *Index) writeMessages(dst compactWriter, src BodySource, lo, hi int, msgs []json.RawMessage, first *bool) ([]json.RawMessage, error) {
	for k := lo; k < hi; k++ {
		var err error
		if msgs, err = ix.winMessages(msgs[:0], k, src); err != nil {
			return msgs, err
		}
		for _, m := range msgs {
			if !*first {
				dst.WriteByte(',')
			}
			*first = false
			compactHTML(dst, m)
		}
		clear(msgs) // no reference to this body outlives the entry
		if _, err := dst.Write(nil); err != nil {
			return msgs, err
		}
	}
	return msgs, nil
}

// jsonOut is where the corpus shape is written: lit for the shape's own
// text, val for a JSON value taken from a line.
type jsonOut interface {
	lit(s string)
	val(v []byte)
}

// plainOut writes values as they are (Context.MarshalJSON, whose caller,
// json.Marshal, compacts and escapes the whole).
type plainOut struct{ b *bytes.Buffer }

func (o plainOut) lit(s string) { o.b.WriteString(s) }
func (o plainOut) val(v []byte) { o.b.Write(v) }

// marshalOut writes each value as json.Marshal passes on a Marshaler's
// output: compacted and HTML-escaped. scratch grows to the largest value.
type marshalOut struct {
	w   *bufio.Writer
	err error
}

func (o *marshalOut) lit(s string) {
	if o.err == nil {
		_, o.err = o.w.WriteString(s)
	}
}

func (o *marshalOut) val(v []byte) {
	if o.err != nil {
		return
	}
	// Straight into the writer, not through a scratch copy: a context's
	// bytes are copied once less, and a huge message needs no scratch of
	// its size. The writer keeps its first error; an empty write reads it.
	compactHTML(o.w, v)
	_, o.err = o.w.Write(nil)
}

// compactHTML appends the JSON value v to dst as json.Compact and then
// json.HTMLEscape would: whitespace outside strings dropped, and <, >, &,
// U+2028 and U+2029 written as \u escapes; numbers as JavaScript writes
// them (jsNumberJSON). Unlike json.Compact it has no
// depth limit (10,000 levels there): pi passes content of any depth
// through, and v was read from a line the reader already took as JSON.
func compactHTML(dst compactWriter, v []byte) {
	const hex = "0123456789abcdef"
	start := 0 // v[start:i] is pending, to be copied as is
	for i := 0; i < len(v); {
		switch v[i] {
		case ' ', '\t', '\n', '\r':
			dst.Write(v[start:i])
			i++
			start = i
			continue
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			// A number as pi writes it back (JSON.stringify of what
			// JSON.parse read): 1.0 is 1, 1E+2 is 100, -0 is 0, and one
			// past the largest double (1e400) is null, which a reader in
			// Go could not have taken as a number at all.
			j := i + 1
			for j < len(v) && numberByte[v[j]] {
				j++
			}
			if js, same := jsNumberJSON(v[i:j]); !same {
				dst.Write(v[start:i])
				dst.WriteString(js)
				start = j
			}
			i = j
			continue
		case '"':
		default:
			i++
			continue
		}
		// A string, nearly all of a message: runs of bytes that stay as
		// they are are skipped by table, not byte by byte through a switch.
		for i++; i < len(v); {
			for i+8 <= len(v) && !mayBeSpecial(binary.LittleEndian.Uint64(v[i:])) {
				i += 8
			}
			for i < len(v) && !stringSpecial[v[i]] {
				i++
			}
			if i >= len(v) {
				break
			}
			c := v[i]
			if c == '"' {
				i++
				break
			}
			if c == '\\' {
				i += 2 // the escaped byte is ASCII, never one to escape
				continue
			}
			if c == 0xe2 {
				if i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xa8 {
					// U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR
					dst.Write(v[start:i])
					dst.WriteString(`\u202`)
					dst.WriteByte(hex[v[i+2]&0xf])
					start = i + 3
				}
				i++
				continue
			}
			// <, > or &
			dst.Write(v[start:i])
			dst.WriteString(`\u00`)
			dst.WriteByte(hex[c>>4])
			dst.WriteByte(hex[c&0xf])
			i++
			start = i
		}
	}
	dst.Write(v[start:])
}

// numberByte marks the bytes a JSON number is made of after its first.
var numberByte = [256]bool{'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true,
	'7': true, '8': true, '9': true, '.': true, 'e': true, 'E': true, '+': true, '-': true}

// jsNumberJSON is the JSON number tok as JSON.stringify writes the value
// JSON.parse reads from it, and whether that is tok itself.
func jsNumberJSON(tok []byte) (string, bool) {
	if jsPlain(tok) {
		return "", true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil && !math.IsInf(f, 0) {
		return "", true // not a number (the line was read as JSON: never)
	}
	if math.IsInf(f, 0) {
		return "null", false
	}
	js := jsNumberString(f)
	return js, js == string(tok)
}

// jsPlain reports, without parsing it, whether JavaScript writes number
// tok back as it is: what nearly every number of a session is (a time in
// ms, a count, a cost). That holds for a decimal of at most 15 significant
// digits (every such decimal is the shortest that gives its double back),
// without an exponent, a fraction ending in 0, or -0, and not under 1e-6
// (written with an exponent).
func jsPlain(tok []byte) bool {
	d := tok
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	i := 0
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	whole := d[:i]
	if len(whole) == 0 || (whole[0] == '0' && len(whole) > 1) {
		return false
	}
	if i == len(d) {
		return len(whole) <= 15 && (whole[0] != '0' || len(tok) == 1)
	}
	if d[i] != '.' {
		return false // an exponent
	}
	frac := d[i+1:]
	if len(frac) == 0 || frac[len(frac)-1] == '0' {
		return false
	}
	for _, c := range frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	sig := len(whole) + len(frac)
	if whole[0] == '0' {
		z := 0
		for z < len(frac) && frac[z] == '0' {
			z++
		}
		if z > 5 {
			return false
		}
		sig = len(frac) - z
	}
	return sig <= 15
}

// compactWriter is where compactHTML writes: a bytes.Buffer or a
// bufio.Writer.
type compactWriter interface {
	Write(p []byte) (int, error)
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

// stringSpecial marks the bytes compactHTML looks at inside a string: its
// end, an escape, what json.Marshal escapes for HTML, and the first byte
// of U+2028 and U+2029.
var stringSpecial = [256]bool{'"': true, '\\': true, '<': true, '>': true, '&': true, 0xe2: true}

// mayBeSpecial reports whether one of the eight bytes of x may be one that
// stringSpecial marks: a '"', '\\', '<', '>' or '&', or any byte of 0x80
// or more (0xe2 among them; the table decides). Eight bytes are passed
// over at once where a string holds none: most of a message's text.
func mayBeSpecial(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	// A byte of y is 0 when (y-lo)&^y&hi is not (exact when any is).
	q, b, a, amp := x^('"'*lo), x^('\\'*lo), (x|0x02*lo)^('>'*lo), x^('&'*lo)
	return (x|(q-lo)&^q|(b-lo)&^b|(a-lo)&^a|(amp-lo)&^amp)&hi != 0
}

// writeHead writes the corpus shape up to the first message:
// {"leafId":…,"contextEntryIds":[…],"messages":[
func writeHead(o jsonOut, leaf ID, ids []ID) {
	o.lit("{")
	if leaf.IsUndefined() {
		o.lit(`"leafIdUndefined":true`)
	} else {
		o.lit(`"leafId":`)
		id, _ := leaf.MarshalJSON()
		o.val(id)
	}
	o.lit(`,"contextEntryIds":[`)
	for i, id := range ids {
		if i > 0 {
			o.lit(",")
		}
		raw, _ := id.MarshalJSON()
		o.val(raw)
	}
	o.lit(`],"messages":[`)
}

// writeTail closes the messages and writes the settings.
func writeTail(o jsonOut, thinking, model json.RawMessage) {
	o.lit("]")
	if thinking != nil {
		o.lit(`,"thinkingLevel":`)
		o.val(thinking)
	}
	o.lit(`,"model":`)
	if model == nil {
		o.lit("null")
	} else {
		o.val(model)
	}
	o.lit("}")
}
