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

	// f holds the raw values of the members Tree.Append reads, taken in
	// ParseLine's one pass over the line, so that Append does not scan the
	// line again (f.ok false: a Line made without ParseLine).
	f lineFields
}

// lineFields are the raw values (nil: absent) of the members of an entry
// the tree reads (tree.go), the last of duplicate keys winning, as in
// JSON.parse. Each aliases the line, capped as eachMember caps it.
type lineFields struct {
	ok                                           bool
	id, parent, typ, ts, message                 []byte
	targetID, replacement, provider, modelID     []byte
	thinking, firstKept, retainedTail, systemMsg []byte
	fkIndex, label, name                         []byte
	msg                                          msgFields
}

// msgFields are the members of an entry's message object the tree reads;
// ok false when message is not an object ParseLine took apart (the tree
// then decodes message itself, as before).
type msgFields struct {
	ok                           bool
	role, usage, provider, model []byte
}

// mapFields is lineFields from an objectMap of the entry, for a Line that
// did not come from ParseLine.
func mapFields(m map[string]json.RawMessage) lineFields {
	return lineFields{ok: true, id: m["id"], parent: m["parentId"], typ: m["type"], ts: m["timestamp"],
		message: m["message"], targetID: m["targetId"], replacement: m["replacement"],
		provider: m["provider"], modelID: m["modelId"], thinking: m["thinkingLevel"],
		firstKept: m["firstKeptEntryId"], retainedTail: m["retainedTail"], systemMsg: m["systemMessage"],
		fkIndex: m["firstKeptEntryIndex"], label: m["label"], name: m["name"]}
}

// scanMessage takes apart the message object at raw[at] in the same pass
// that validates it, and returns the offset past it. On an error the
// caller falls back to skipValue, which decides whether the line is
// malformed, exactly as before.
func scanMessage(raw []byte, at int, m *msgFields) (int, error) {
	*m = msgFields{}
	e, err := scanMembers(raw, at, func(k []byte, at int) (int, error) {
		ve, err := skipValue(raw, at)
		if err != nil {
			return 0, err
		}
		switch string(k) {
		case "role":
			m.role = raw[at:ve:ve]
		case "usage":
			m.usage = raw[at:ve:ve]
		case "provider":
			m.provider = raw[at:ve:ve]
		case "model":
			m.model = raw[at:ve:ve]
		}
		return ve, nil
	})
	if err != nil {
		*m = msgFields{}
		return 0, err
	}
	m.ok = true
	return e, nil
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
	var version []byte
	f := &l.f
	e, err := scanMembers(raw, i, func(k []byte, at int) (int, error) {
		if string(k) == "message" && raw[at] == '{' {
			// The body of a message entry: taken apart in this pass.
			if ve, err := scanMessage(raw, at, &f.msg); err == nil {
				f.message = raw[at:ve:ve]
				return ve, nil
			}
		}
		ve, err := skipValue(raw, at)
		if err != nil {
			return 0, err // a truncated value: the line is malformed
		}
		v := raw[at:ve:ve]
		switch string(k) {
		case "type":
			f.typ = v
		case "id":
			f.id = v
		case "parentId":
			f.parent = v
		case "version":
			version = v
		case "timestamp":
			f.ts = v
		case "message":
			f.message, f.msg = v, msgFields{}
		case "targetId":
			f.targetID = v
		case "replacement":
			f.replacement = v
		case "provider":
			f.provider = v
		case "modelId":
			f.modelID = v
		case "thinkingLevel":
			f.thinking = v
		case "firstKeptEntryId":
			f.firstKept = v
		case "retainedTail":
			f.retainedTail = v
		case "systemMessage":
			f.systemMsg = v
		case "firstKeptEntryIndex":
			f.fkIndex = v
		case "label":
			f.label = v
		case "name":
			f.name = v
		}
		return ve, nil
	})
	if err != nil || end(raw, e) != nil {
		return Line{Raw: raw, Kind: Malformed}
	}
	f.ok = true
	l.Kind = Entry
	if s, ok := typeName(f.typ); ok {
		l.Type = s
		if s == "session" {
			l.Kind = Header
		}
	}
	l.ID, l.HasID = jsString(f.id)
	l.ParentID, l.HasParent = jsString(f.parent)
	if l.Kind == Header && isNumberRaw(version) {
		l.Version, _ = strconv.ParseFloat(string(version), 64)
	}
	return l
}

// EntryTypes are the entry types pi writes (spec §6, `usage` and
// `context_edit` since pi 0.86), the header's "session" first. pi adds
// types of its own accord: a line of another type is kept as it is.
var EntryTypes = []string{
	"session", "message", "thinking_level_change", "model_change", "compaction", "branch_summary",
	"custom", "custom_message", "label", "session_info", "usage", "context_edit",
}

// typeName is jsString of a "type" value, without a copy for the types pi
// writes.
func typeName(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		switch string(raw[1 : len(raw)-1]) {
		case "message":
			return "message", true
		case "session":
			return "session", true
		case "compaction":
			return "compaction", true
		case "model_change":
			return "model_change", true
		case "thinking_level_change":
			return "thinking_level_change", true
		case "branch_summary":
			return "branch_summary", true
		case "custom_message":
			return "custom_message", true
		case "custom":
			return "custom", true
		case "label":
			return "label", true
		case "session_info":
			return "session_info", true
		case "usage":
			return "usage", true
		case "context_edit":
			return "context_edit", true
		}
	}
	return jsString(raw)
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
