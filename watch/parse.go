package watch

import (
	"bytes"
	"encoding/json"

	"github.com/pisyncd/pisyncd/session"
)

// parseLong classifies a line as session.ParseLine does, without copying
// it. ParseLine decodes an object into map[string]json.RawMessage, which
// copies every value: for a 60 MB line, a second 60 MB. parseLong finds
// the few envelope members the tailer needs (type, id, parentId) in place
// instead; FuzzParseLong holds it to ParseLine's answers. It is used for
// lines read back whole, the only ones large enough for the copy to
// matter.
func parseLong(raw []byte) session.Line {
	if !json.Valid(raw) {
		return session.ParseLine(raw) // blank or malformed: no copy on that path
	}
	t := bytes.TrimLeft(raw, " \t\r\n")
	if t[0] != '{' {
		return session.ParseLine(raw) // a scalar: no copy either
	}
	var typ, id, parent []byte
	eachTopMember(t, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "id":
			id = val
		case "parentId":
			parent = val
		}
	})
	l := session.Line{Raw: raw, Kind: session.Entry}
	if s, ok := jsonString(typ); ok {
		l.Type = s
		if s == "session" {
			l.Kind = session.Header
		}
	}
	l.ID, l.HasID = jsonString(id)
	l.ParentID, l.HasParent = jsonString(parent)
	return l
}

// jsonString decodes raw when it is a JSON string, as ParseLine does.
func jsonString(raw []byte) (string, bool) { return session.JSString(raw) }

// eachTopMember calls fn for each member of the object that b (valid JSON,
// starting with '{') holds, with its key unescaped and its value's bytes.
func eachTopMember(b []byte, fn func(key, val []byte)) {
	i := skipSpace(b, 1)
	for i < len(b) && b[i] == '"' {
		ke := skipStr(b, i)
		key := b[i+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(b[i:ke], &s) != nil {
				return
			}
			key = []byte(s)
		}
		i = skipSpace(b, ke)
		i = skipSpace(b, i+1) // the ':'
		ve := skipVal(b, i)
		fn(key, b[i:ve])
		i = skipSpace(b, ve)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i = skipSpace(b, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipStr returns the offset past the string that starts at b[i].
func skipStr(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipVal returns the offset past the value that starts at b[i].
func skipVal(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipStr(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipStr(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default: // a number or a literal
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' &&
			b[i] != ' ' && b[i] != '\t' && b[i] != '\r' && b[i] != '\n' {
			i++
		}
		return i
	}
}
