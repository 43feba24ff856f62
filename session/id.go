package session

import (
	"encoding/json"
	"math"
	"strconv"
)

type idKind uint8

const (
	idUndefined idKind = iota // the field is absent (pseudo-entries)
	idNull
	idString
	idNumber
	idBool
	idObject // an object or array: equal only to itself (JS identity)
)

// ID is the value of an entry's "id" (or "parentId", "targetId", ...) field
// as pi sees it. Almost always a string, but pi keys its Maps by whatever
// JSON value stands there, including none at all, and that decides trees and
// leaves of damaged files. The zero ID is "undefined" (field absent).
type ID struct {
	kind idKind
	s    string // string value, canonical JS number text, "true"/"false", or raw JSON of an object
}

// StringID returns the ID holding the string s.
func StringID(s string) ID { return ID{kind: idString, s: s} }

// String returns the id when it is a JSON string.
func (id ID) String() (string, bool) { return id.s, id.kind == idString }

// IsUndefined reports whether the field was absent.
func (id ID) IsUndefined() bool { return id.kind == idUndefined }

// IsNull reports whether the field was JSON null.
func (id ID) IsNull() bool { return id.kind == idNull }

// truthy is JavaScript truthiness: pi follows parentIds and uses leaf ids
// only when they are truthy, so "" and 0 end a path like null does.
func (id ID) truthy() bool {
	switch id.kind {
	case idString:
		return id.s != ""
	case idNumber:
		return id.s != "0" && id.s != "NaN"
	case idBool:
		return id.s == "true"
	case idObject:
		return true
	}
	return false
}

// mapKey reports whether the ID can match another one (SameValueZero);
// objects are unique and never do.
func (id ID) mapKey() bool { return id.kind != idObject }

// same is JavaScript === between two ids.
func (id ID) same(o ID) bool { return id.mapKey() && id == o }

// propName is the property name the ID becomes as a JavaScript object key
// (String(id)), used for label and children maps in pi's output.
func (id ID) propName() string {
	switch id.kind {
	case idUndefined:
		return "undefined"
	case idNull:
		return "null"
	case idObject:
		if len(id.s) > 0 && id.s[0] == '[' {
			return jsArrayString(json.RawMessage(id.s))
		}
		return "[object Object]"
	}
	return id.s
}

// MarshalJSON writes the id as JSON; undefined becomes null, as in a JSON
// array (callers omit undefined object fields themselves).
func (id ID) MarshalJSON() ([]byte, error) {
	switch id.kind {
	case idUndefined, idNull:
		return []byte("null"), nil
	case idString:
		return jsonQuote(id.s), nil
	case idNumber:
		if id.s == "Infinity" || id.s == "-Infinity" || id.s == "NaN" {
			return []byte("null"), nil
		}
		return []byte(id.s), nil
	}
	return []byte(id.s), nil
}

// idFromRaw converts a field value; a nil raw means the field is absent.
func idFromRaw(raw json.RawMessage) ID {
	raw = trimWS(raw)
	if len(raw) == 0 {
		return ID{}
	}
	switch raw[0] {
	case '"':
		if s, ok := jsString(raw); ok {
			return ID{kind: idString, s: s}
		}
	case 'n':
		return ID{kind: idNull}
	case 't', 'f':
		return ID{kind: idBool, s: string(raw)}
	case '{', '[':
		return ID{kind: idObject, s: string(raw)}
	default:
		f, _ := strconv.ParseFloat(string(raw), 64) // out of range gives ±Inf, as JSON.parse does
		return ID{kind: idNumber, s: jsNumberString(f)}
	}
	return ID{}
}

// jsNumberString is Number.prototype.toString() for a float64.
func jsNumberString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	neg := f < 0
	if neg {
		f = -f
	}
	// Shortest round-trip digits and exponent, then ECMAScript's layout.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expS, _ := cutByte(e, 'e')
	digits := mant[:1]
	if len(mant) > 2 {
		digits += mant[2:]
	}
	exp, _ := strconv.Atoi(expS)
	k := len(digits)
	n := exp + 1
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + zeros(n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + zeros(-n) + digits
	default:
		sign := "+"
		if n-1 < 0 {
			sign = "-"
		}
		ev := n - 1
		if ev < 0 {
			ev = -ev
		}
		if k == 1 {
			out = digits + "e" + sign + strconv.Itoa(ev)
		} else {
			out = digits[:1] + "." + digits[1:] + "e" + sign + strconv.Itoa(ev)
		}
	}
	if neg {
		return "-" + out
	}
	return out
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

func cutByte(s string, c byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
