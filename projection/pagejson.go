package projection

import (
	"encoding/json"
	"strconv"

	"github.com/pisyncd/pisyncd/session"
)

// appendPage appends page p of a context index, of the window entries ids
// and the refs over the same positions, exactly as json.Marshal writes
// that ContextPage, kept under maxValue: only ids of absurd length can get
// there (2,048 pi ids take ~25 KiB), and then the ids are cut and the page
// says so, while the refs, which a full context needs, stay whole
// (reckoned as 64 bytes, each ref with 3 and each id with 1 more, as
// before). A page is written
// again after every line of a session that has fewer than pageSize
// entries (then it is the whole index): built through []json.RawMessage
// and []string and marshalled by reflection, it cost two allocations an
// entry and was the largest part of a live line's projection.
func appendPage(b []byte, p int, ids []session.ID, refs []session.Ref, src Src) []byte {
	b = append(b, `{"page":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	// The refs whole, then ids while they fit.
	size := 64
	for _, r := range refs {
		size += refLen(r) + 3
	}
	truncated := false
	b = append(b, `,"ids":[`...)
	for i, id := range ids {
		s, plain := id.String()
		plain = plain && plainJSON(s)
		var raw json.RawMessage
		n := len(s) + 2
		if !plain {
			raw = rawID(id)
			n = len(raw)
		}
		if size += n + 1; size > maxValue {
			truncated = true
			break
		}
		if i > 0 {
			b = append(b, ',')
		}
		if plain {
			b = append(b, '"')
			b = append(b, s...)
			b = append(b, '"')
			continue
		}
		// Anything else as encoding/json has it: a RawMessage is
		// compacted with <, >, & and U+2028/9 escaped.
		j, _ := json.Marshal(raw)
		b = append(b, j...)
	}
	b = append(b, `],"refs":[`...)
	for i, r := range refs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = appendRef(b, r)
		b = append(b, '"')
	}
	b = append(b, ']')
	if truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"src":`...)
	j, _ := json.Marshal(src)
	b = append(b, j...)
	return append(b, '}')
}

// plainJSON reports whether the JSON string of s is s between quotes, in
// session.ID's encoding and in encoding/json's alike: printable ASCII
// without a quote, a backslash or one of the characters encoding/json
// escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// appendRef appends refString(r).
func appendRef(b []byte, r session.Ref) []byte {
	if r&allBit != 0 {
		b = append(b, "A:"...)
	} else {
		b = append(b, "L:"...)
	}
	return strconv.AppendUint(b, refSeq(r), 10)
}

// refLen is len(refString(r)).
func refLen(r session.Ref) int {
	n := 3
	for v := refSeq(r); v >= 10; v /= 10 {
		n++
	}
	return n
}
