package session

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
)

// Kind classifies one line of a session file the way pi's loader sees it
// (spec §2): blank and malformed lines and falsy JSON values are skipped,
// any other JSON value is kept, and objects are headers or entries.
type Kind uint8

const (
	Blank     Kind = iota // empty or JS-whitespace only: skipped by pi
	Malformed             // JSON.parse fails: skipped by pi
	Falsy                 // null, false, 0, "": skipped by pi
	Scalar                // a kept non-object value (number, string, array, true): a pseudo-entry
	Header                // an object with "type":"session"
	Entry                 // any other object
)

var kindNames = [...]string{"blank", "malformed", "falsy", "scalar", "header", "entry"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Kept reports whether pi keeps a line of this kind as a value of the file.
func (k Kind) Kept() bool { return k >= Scalar }

// Line is one line of a session file with its envelope decoded. Raw is the
// line exactly as in the file, without the terminating '\n' (a '\r' before it
// stays: it is JSON whitespace to pi).
type Line struct {
	Raw  []byte
	Kind Kind
	// Type is the object's "type" when it is a string.
	Type string
	// ID is the object's "id" when it is a string (HasID). A header's ID is
	// the session id.
	ID    string
	HasID bool
	// ParentID is the entry's "parentId" when it is a string (HasParent);
	// null or absent leaves HasParent false.
	ParentID  string
	HasParent bool
	// Version is the header's numeric "version", 0 when absent or not a number.
	Version float64
}

// ParseLine classifies raw (one line without its '\n') and decodes the
// envelope fields of an object. It never fails: what pi would skip is
// reported through Kind. Keys are matched exactly (JSON.parse semantics, last
// duplicate wins), and any nesting depth is accepted, as JSON.parse does.
func ParseLine(raw []byte) Line {
	l := Line{Raw: raw}
	if len(trimJS(raw)) == 0 {
		l.Kind = Blank
		return l
	}
	// JSON.parse sees the untrimmed line and allows only JSON white space
	// around the value (a BOM or NBSP fails it).
	i := skipWS(raw, 0)
	if raw[i] != '{' {
		if !validJSON(raw) {
			l.Kind = Malformed
			return l
		}
		l.Kind = scalarKind(raw[i:])
		return l
	}
	var typ, id, parent, version []byte
	e, err := scanMembers(raw, i, func(k []byte, at int) (int, error) {
		ve, err := skipValue(raw, at)
		if err != nil {
			return 0, err // a truncated value: the line is malformed
		}
		switch string(k) {
		case "type":
			typ = raw[at:ve]
		case "id":
			id = raw[at:ve]
		case "parentId":
			parent = raw[at:ve]
		case "version":
			version = raw[at:ve]
		}
		return ve, nil
	})
	if err != nil || end(raw, e) != nil {
		l.Kind = Malformed
		return l
	}
	l.Kind = Entry
	if s, ok := jsString(typ); ok {
		l.Type = s
		if s == "session" {
			l.Kind = Header
		}
	}
	l.ID, l.HasID = jsString(id)
	l.ParentID, l.HasParent = jsString(parent)
	if l.Kind == Header && isNumberRaw(version) {
		l.Version, _ = strconv.ParseFloat(string(version), 64)
	}
	return l
}

// scalarKind classifies a valid JSON value that is not an object: null,
// false, 0 and "" are falsy to JavaScript, the rest are kept.
func scalarKind(t []byte) Kind {
	switch t[0] {
	case 'n', 'f':
		return Falsy
	case '"':
		if t[1] == '"' {
			return Falsy
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if isZero(t) {
			return Falsy
		}
	}
	return Scalar
}

// jsonString decodes raw when it is a JSON string (see jsString).
func jsonString(raw json.RawMessage) (string, bool) { return jsString(raw) }

// isZero reports whether the JSON number t equals zero (0, -0, 0.0, 0e5):
// JavaScript treats those as falsy.
func isZero(t []byte) bool {
	for _, c := range t {
		switch {
		case c == 'e' || c == 'E':
			return true // mantissa was all zeros
		case c >= '1' && c <= '9':
			return false
		}
	}
	return true
}

// trimJS trims what String.prototype.trim removes: JS white space and line
// terminators (including U+FEFF and U+00A0, which JSON.parse rejects).
// Invalid UTF-8 decodes to U+FFFD in pi, which is not white space, and the
// Func variants stop at it too.
func trimJS(b []byte) []byte {
	b = bytes.TrimLeftFunc(b, isJSSpace)
	return bytes.TrimRightFunc(b, isJSSpace)
}

// isJSSpace is JavaScript's WhiteSpace or LineTerminator: Unicode White_Space
// plus U+FEFF, minus U+0085.
func isJSSpace(r rune) bool {
	return r == '\uFEFF' || (r != '\u0085' && unicode.IsSpace(r))
}
