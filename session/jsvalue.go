package session

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the JavaScript value semantics pi's rules depend on, for
// values kept as raw JSON.

func trimWS(b []byte) []byte {
	// Not bytes.Trim: it builds its set of bytes on every call, and the
	// tree trims several values of every line.
	i, j := 0, len(b)
	for i < j && isWS(b[i]) {
		i++
	}
	for j > i && isWS(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// isAbsent reports whether a field is missing or null (JS `x == null`).
func isAbsent(raw json.RawMessage) bool {
	raw = trimWS(raw)
	return len(raw) == 0 || raw[0] == 'n'
}

// truthy is JavaScript truthiness of a raw JSON value (absent = undefined).
func truthy(raw json.RawMessage) bool {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 'n', 'f':
		return false
	case 't', '{', '[':
		return true
	case '"':
		return len(raw) > 2
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err != nil || f != 0 // ±Inf (out of range) is truthy
}

// rawString decodes raw when it is a JSON string.
func rawString(raw json.RawMessage) (string, bool) { return jsonString(trimWS(raw)) }

// isArray is Array.isArray for a raw value.
func isArray(raw json.RawMessage) bool {
	raw = trimWS(raw)
	return len(raw) > 0 && raw[0] == '['
}

// isObject reports whether raw is a JSON object (not an array).
func isObject(raw json.RawMessage) bool {
	raw = trimWS(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// jsToNumber is ToNumber for a raw value; absent is NaN.
func jsToNumber(raw json.RawMessage) float64 {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return math.NaN()
	}
	switch raw[0] {
	case 'n', 'f':
		return 0
	case 't':
		return 1
	case '{':
		return math.NaN()
	case '[':
		return stringToNumber(jsArrayString(raw))
	case '"':
		s, _ := jsonString(raw)
		return stringToNumber(s)
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	return f
}

// stringToNumber is StringToNumber: trimmed, empty is 0, decimal or 0x/0o/0b
// literals, Infinity; anything else NaN.
func stringToNumber(s string) float64 {
	s = string(trimJS([]byte(s)))
	if s == "" {
		return 0
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			u, err := strconv.ParseUint(s[2:], base, 64)
			if err != nil {
				return math.NaN()
			}
			return float64(u)
		}
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return math.NaN()
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return math.NaN()
	}
	return f
}

// jsJoinString is how Array.prototype.join renders one element: null and
// undefined become "", everything else String(x).
func jsJoinString(raw json.RawMessage) string {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case 'n':
		return ""
	case 't', 'f':
		return string(raw)
	case '"':
		s, _ := jsonString(raw)
		return s
	case '{':
		return "[object Object]"
	case '[':
		return jsArrayString(raw)
	}
	f, _ := strconv.ParseFloat(string(raw), 64)
	return jsNumberString(f)
}

// jsArrayString is String(array): the elements joined with ",", an array
// element joined the same way in its place. So the result is every
// scalar's jsJoinString and every object's "[object Object]" in document
// order, with a "," for each "," between elements at any level: one pass
// over raw. (Joining level by level rescans each inner array once per
// level above it, minutes for a timestamp 100,000 arrays deep; pi throws
// past piJoinDepth, which the callers check.) "" when raw is not an array.
func jsArrayString(raw json.RawMessage) string {
	raw = trimWS(raw)
	if len(raw) == 0 || raw[0] != '[' || !validJSON(raw) {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '[', ']', ' ', '\t', '\r', '\n':
			i++
		case ',':
			b.WriteByte(',')
			i++
		default: // a scalar or an object, whole
			e, _ := skipValue(raw, i)
			if c == '{' {
				b.WriteString("[object Object]")
			} else {
				b.WriteString(jsJoinString(raw[i:e]))
			}
			i = e
		}
	}
	return b.String()
}

// toPrimitiveThrows reports whether converting raw to a primitive throws
// a TypeError in JavaScript (String(v), `${v}`, a join, new Date(v), a
// comparison with a number). A JSON object with an own member toString
// holds no function there (JSON cannot), so ToPrimitive finds no callable
// toString, and Object.prototype.valueOf returns the object itself: no
// primitive, whatever the hint. An own valueOf alone is skipped for the
// inherited toString ("[object Object]"), and an object inside an object
// is never converted. An array converts by joining, so an object with an
// own toString reached through arrays alone (`[[{"toString":1}]]`) throws
// too. Checked in one pass, like jsArrayString; a deep array chain
// (piJoinDepth) is the callers' other check.
func toPrimitiveThrows(raw json.RawMessage) bool {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '{':
		return hasOwnToString(raw)
	case '[':
	default:
		return false
	}
	for i := 0; i < len(raw); {
		switch c := raw[i]; c {
		case '[', ']', ',', ' ', '\t', '\r', '\n':
			i++
		default: // a scalar or an object, whole
			e, err := skipValue(raw, i)
			if err != nil {
				return false
			}
			if c == '{' && hasOwnToString(raw[i:e]) {
				return true
			}
			i = e
		}
	}
	return false
}

// hasOwnToString reports whether the object raw has a member named
// toString (spelled with escapes or not, any value, null included).
func hasOwnToString(raw []byte) bool {
	found := false
	eachMember(raw, func(k, _ []byte) { found = found || string(k) == "toString" })
	return found
}

// objectMap decodes the members of a JSON object as JSON.parse keeps them:
// the last of duplicate keys wins. Values stay raw, so any depth is fine.
func objectMap(raw []byte) (map[string]json.RawMessage, error) {
	m := make(map[string]json.RawMessage)
	err := eachMember(raw, func(k, v []byte) { m[string(k)] = v })
	if err != nil {
		return nil, err
	}
	return m, nil
}

// field is one member of a JSON object, in document order.
type field struct {
	key string
	val json.RawMessage
}

// objectFields decodes a JSON object keeping member order, which a map would
// lose. Duplicate keys keep their first position and last value, as
// JSON.parse does.
func objectFields(raw []byte) ([]field, error) {
	var out []field
	var pos map[string]int // built once the object is large, to stay linear
	err := eachMember(raw, func(k, v []byte) {
		key := string(k)
		if pos == nil && len(out) >= 32 {
			pos = make(map[string]int, 2*len(out))
			for i, f := range out {
				pos[f.key] = i
			}
		}
		if pos != nil {
			if i, ok := pos[key]; ok {
				out[i].val = v
				return
			}
			pos[key] = len(out)
		} else {
			for i := range out {
				if out[i].key == key {
					out[i].val = v
					return
				}
			}
		}
		out = append(out, field{key, v})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// getField returns the value of key, nil when absent.
func getField(fs []field, key string) json.RawMessage {
	for _, f := range fs {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// setField replaces key in place or appends it, as a JS assignment does;
// a nil val deletes it.
func setField(fs []field, key string, val json.RawMessage) []field {
	for i := range fs {
		if fs[i].key == key {
			if val == nil {
				return append(fs[:i:i], fs[i+1:]...)
			}
			fs[i].val = val
			return fs
		}
	}
	if val == nil {
		return fs
	}
	return append(fs, field{key, val})
}

// encodeFields writes an object in member order.
func encodeFields(fs []field) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonQuote(f.key))
		b.WriteByte(':')
		b.Write(f.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// ToValidUTF8 replaces invalid UTF-8 the way the WHATWG decoder in node's
// StringDecoder does: one U+FFFD per maximal subpart of an ill-formed
// sequence (bytes.ToValidUTF8 would merge runs into one).
func ToValidUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n != 1 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		out = append(out, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return out
}

// maximalSubpart is the length of the ill-formed prefix of b that the
// decoder replaces with one U+FFFD: a lead byte plus the continuation bytes
// that could still have completed a valid sequence.
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if x < lo || x > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}
