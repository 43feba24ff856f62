package session

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strings"
)

// Summary is what pi's session list shows for a file (spec §9,
// SessionManager.listAll / buildSessionInfo), plus usage totals.
type Summary struct {
	ID                json.RawMessage // header id, any JSON value (list does not check it)
	Cwd               string          // header cwd, "" when not a string
	Name              string          // last session_info name, trimmed
	HasName           bool
	ParentSessionPath json.RawMessage // header parentSession; nil when absent
	Created           float64         // Date value of the header timestamp (ms, NaN invalid)
	Modified          float64         // newest user/assistant activity, else Created, else the mtime given
	MessageCount      int
	FirstMessage      string // "(no messages)" when no user message has text
	AllMessagesText   string
	Stats
}

// Summarizer builds a Summary from the lines of a file, fed in order. It
// reads as pi's list does, which differs from open(): lines also end at a
// lone '\r', the header's id may be any value, and some malformed entries
// (a message entry without message, non-array content, a non-string name)
// make pi drop the file from the list.
type Summarizer struct {
	header   map[string]json.RawMessage
	dropped  bool
	name     json.RawMessage
	last     float64
	hasLast  bool
	first    string
	all      []string
	messages int
	stats    Stats
}

// Add feeds one '\n'-terminated line (without the '\n').
func (s *Summarizer) Add(line []byte) {
	line = ToValidUTF8(line)
	for {
		i := bytes.IndexByte(line, '\r')
		if i < 0 {
			s.addLine(line)
			return
		}
		s.addLine(line[:i])
		line = line[i+1:]
	}
}

func (s *Summarizer) addLine(raw []byte) {
	if s.dropped {
		return
	}
	l := ParseLine(raw)
	if !l.Kind.Kept() {
		return
	}
	if s.header == nil {
		h, err := objectMap(l.Raw)
		if l.Kind != Header || err != nil {
			s.dropped = true
		}
		s.header = h
		return
	}
	if l.Kind != Entry && l.Kind != Header {
		return
	}
	e, err := objectMap(l.Raw)
	if err != nil {
		return
	}
	if l.Type == "session_info" {
		if _, _, err := jsTrimName(e["name"]); err != nil {
			s.dropped = true // pi: name.trim is not a function
			return
		}
		s.name = e["name"]
	}
	if l.Type != "message" {
		return
	}
	s.messages++
	m := e["message"]
	if isAbsent(m) {
		s.dropped = true // pi: reading .role of undefined
		return
	}
	msg, err := objectMap(m)
	if !isObject(m) || err != nil {
		return
	}
	role, roleIsString := rawString(msg["role"])
	content, hasContent := msg["content"]
	if !roleIsString || !hasContent || (role != "user" && role != "assistant") {
		return
	}
	if role == "assistant" {
		s.stats.addUsage(msg["usage"])
	}
	var t float64
	if isNumberRaw(msg["timestamp"]) {
		t = jsToNumber(msg["timestamp"])
	} else {
		if toPrimitiveThrows(e["timestamp"]) {
			s.dropped = true // pi: new Date(timestamp) finds no callable toString
			return
		}
		t = dateValue(e["timestamp"])
	}
	if !math.IsNaN(t) {
		if !s.hasLast {
			s.last, s.hasLast = 0, true
		}
		s.last = math.Max(s.last, t)
	}
	text, ok := extractText(content)
	if !ok {
		s.dropped = true // pi: content.filter is not a function / block.type of null
		return
	}
	if text == "" {
		return
	}
	s.all = append(s.all, text)
	if s.first == "" && role == "user" {
		s.first = text
	}
}

// extractText is pi's extractTextContent; ok is false where it throws.
func extractText(content json.RawMessage) (string, bool) {
	if str, ok := rawString(content); ok {
		return str, true
	}
	var blocks []json.RawMessage
	if !isArray(content) || eachElement(content, func(b []byte) { blocks = append(blocks, b) }) != nil {
		return "", false
	}
	var parts []string
	for _, b := range blocks {
		if isAbsent(b) {
			return "", false
		}
		blk, err := objectMap(b)
		if !isObject(b) || err != nil {
			continue
		}
		if typ, _ := rawString(blk["type"]); typ == "text" {
			if toPrimitiveThrows(blk["text"]) {
				return "", false // pi: join finds no callable toString
			}
			parts = append(parts, jsJoinString(blk["text"]))
		}
	}
	return strings.Join(parts, " "), true
}

// Summary returns the summary, or false when pi's list skips the file.
// mtime (ms) is the last resort for Modified, as pi uses the file's.
func (s *Summarizer) Summary(mtime float64) (*Summary, bool) {
	if s.dropped || s.header == nil || toPrimitiveThrows(s.header["timestamp"]) {
		// pi: new Date(header.timestamp) with an own toString throws
		return nil, false
	}
	h := s.header
	out := &Summary{
		ID:                h["id"],
		ParentSessionPath: h["parentSession"],
		Created:           dateValue(h["timestamp"]),
		MessageCount:      s.messages,
		FirstMessage:      utf8Safe(s.first),
		AllMessagesText:   utf8Safe(strings.Join(s.all, " ")),
		Stats:             s.stats,
	}
	out.Stats.MessageCount = s.messages
	if out.ID == nil {
		out.ID = json.RawMessage("null")
	}
	out.Cwd, _ = rawString(h["cwd"])
	out.Cwd = utf8Safe(out.Cwd)
	out.Name, out.HasName, _ = jsTrimName(s.name)
	out.Name = utf8Safe(out.Name)
	if out.FirstMessage == "" {
		out.FirstMessage = "(no messages)"
	}
	headerTime := math.NaN()
	if _, ok := rawString(h["timestamp"]); ok {
		headerTime = dateValue(h["timestamp"])
	}
	switch {
	case s.hasLast && s.last > 0:
		out.Modified = timeClip(s.last)
	case !math.IsNaN(headerTime):
		out.Modified = headerTime
	default:
		out.Modified = mtime
	}
	return out, true
}

// Summarize reads a whole file with a Summarizer.
func Summarize(r io.Reader, mtime float64) (*Summary, bool, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, false, err
	}
	var s Summarizer
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		s.Add(line)
		if !more {
			break
		}
		data = rest
	}
	sum, ok := s.Summary(mtime)
	return sum, ok, nil
}

// CreatedISO and ModifiedISO render the times as toISOString does; ok is
// false for an invalid date.
func (s *Summary) CreatedISO() (string, bool) { return isoOK(s.Created) }

// ModifiedISO renders Modified like CreatedISO.
func (s *Summary) ModifiedISO() (string, bool) { return isoOK(s.Modified) }

func isoOK(ms float64) (string, bool) {
	if math.IsNaN(ms) {
		return "", false
	}
	return isoString(ms), true
}
