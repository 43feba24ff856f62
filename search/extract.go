package search

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// MaxText bounds the text indexed (and stored for snippets) of one entry.
// A tool result can be megabytes of output; its first MaxText bytes are
// searchable, the rest is not (docs/PERFORMANCE.md, "Search").
const MaxText = 128 << 10

// Doc is one indexed entry.
type Doc struct {
	SessionID string `json:"sessionId"`
	Node      string `json:"node"`
	EntryID   string `json:"entryId"`
	Type      string `json:"type"`
	Role      string `json:"role,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	Text      string `json:"text"`
}

// docID names a document: one per entry of a session. A second line with
// the same entry id replaces the first (pi's later-line-wins rule).
func docID(sid, entryID string) string { return sid + "/" + entryID }

// line is the part of a pi line the index reads.
type line struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Timestamp json.RawMessage `json:"timestamp"`
	Cwd       string          `json:"cwd"`
	Message   *message        `json:"message"`
	Summary   string          `json:"summary"`
	Content   json.RawMessage `json:"content"`
	Label     string          `json:"label"`
	Name      string          `json:"name"`
	Custom    string          `json:"customType"`
}

type message struct {
	Role     string          `json:"role"`
	Content  json.RawMessage `json:"content"`
	ToolName string          `json:"toolName"`
	Command  string          `json:"command"`
	Output   string          `json:"output"`
	Summary  string          `json:"summary"`
	Custom   string          `json:"customType"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Extract returns the document of one session line, false when the line
// holds nothing to search (settings changes, malformed lines, images only).
// The caller fills in SessionID and Node.
func Extract(raw []byte) (Doc, bool) {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return Doc{}, false
	}
	d := Doc{Type: l.Type, EntryID: l.ID, Timestamp: timestamp(l.Timestamp)}
	var t textBuf
	switch l.Type {
	case "session":
		d.EntryID = "" // the header: the session itself
		t.add(l.Cwd)
	case "message":
		if l.Message == nil {
			return Doc{}, false
		}
		m := l.Message
		d.Role = m.Role
		switch m.Role {
		case "toolResult":
			t.add(m.ToolName)
		case "bashExecution":
			t.add(m.Command)
			t.add(m.Output)
		case "branchSummary", "compactionSummary":
			t.add(m.Summary)
		case "custom", "hookMessage":
			t.add(m.Custom)
		}
		t.content(m.Content)
	case "compaction", "branch_summary":
		t.add(l.Summary)
	case "custom_message":
		t.add(l.Custom)
		t.content(l.Content)
	case "label":
		t.add(l.Label)
	case "session_info":
		t.add(l.Name)
	default:
		return Doc{}, false
	}
	if l.Type != "session" && l.ID == "" {
		return Doc{}, false // an entry without an id cannot be linked to
	}
	d.Text = t.String()
	if d.Text == "" && l.Type != "session" && l.Type != "label" && l.Type != "session_info" {
		// Labels and names cleared still replace the former document.
		return Doc{}, false
	}
	return d, true
}

// timestamp is the entry's timestamp as written (an ISO string; a number
// of milliseconds in some old lines is kept as its digits).
func timestamp(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if len(raw) > 0 && len(raw) < 20 && raw[0] >= '0' && raw[0] <= '9' {
		return string(raw)
	}
	return ""
}

// textBuf joins an entry's texts, one per line, up to MaxText bytes.
type textBuf struct{ b strings.Builder }

func (t *textBuf) add(s string) {
	s = strings.TrimSpace(s)
	if s == "" || t.b.Len() >= MaxText {
		return
	}
	if t.b.Len() > 0 {
		t.b.WriteByte('\n')
	}
	if room := MaxText - t.b.Len(); len(s) > room {
		s = strings.ToValidUTF8(s[:room], "")
	}
	t.b.WriteString(s)
}

// content adds a message's content: a string, or blocks of which text and
// tool calls (name and arguments) are indexed; thinking and images are not.
func (t *textBuf) content(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			t.add(s)
		}
		return
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			t.add(b.Text)
		case "toolCall":
			t.add(b.Name)
			t.args(b.Arguments)
		}
	}
}

// args adds a tool call's arguments: each string argument as its text
// (a command or file content with its newlines, not JSON escapes), any
// other value as its JSON.
func (t *textBuf) args(raw json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		t.add(string(raw))
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // a map's order would make the text differ run to run
	for _, k := range keys {
		v := m[k]
		var s string
		if json.Unmarshal(v, &s) == nil {
			t.add(s)
		} else {
			t.add(string(v))
		}
	}
}

func (t *textBuf) String() string { return t.b.String() }
