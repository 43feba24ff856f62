package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Summary is what the human form shows of a context: the lines of its
// messages are short previews, so a context of any size fits.
type Summary struct {
	Leaf            string
	Entries         int
	Model, Thinking json.RawMessage
	Rules           string // the set used; "" when the daemon did not say
	RulesMode       string // the set asked for
	Lines           []string
}

// Add adds the preview line of a message.
func (s *Summary) Add(m json.RawMessage) {
	var msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Summary string          `json:"summary"`
		Command string          `json:"command"`
	}
	json.Unmarshal(m, &msg)
	text := msg.Summary + msg.Command
	if text == "" {
		text = ContentText(msg.Content)
	}
	s.Lines = append(s.Lines, fmt.Sprintf("%3d %-18s %s", len(s.Lines)+1, OrDash(TerminalSafe(msg.Role)), Preview(text, 100)))
}

// Print writes the summary: a line about the leaf, the window, the model
// and thinking level, one about the rules, then a line per message.
func (s *Summary) Print(w io.Writer) error {
	fmt.Fprintf(w, "leaf %s, %s in the window, %s, model %s, thinking %s\n",
		OrDash(TerminalSafe(s.Leaf)), Plural(s.Entries, "entry", "entries"), Plural(len(s.Lines), "message", "messages"), OrDash(TerminalSafe(ModelName(s.Model))), OrDash(TerminalSafe(JSONText(s.Thinking))))
	if note := RulesNote(s.Rules, s.RulesMode); note != "" {
		fmt.Fprintln(w, note)
	}
	for _, l := range s.Lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// ReadSummary reads a context in the corpus shape (as the daemon sends
// it) one message at a time. Ids other than strings show as null.
func ReadSummary(r io.Reader) (*Summary, error) {
	dec := json.NewDecoder(r)
	s := &Summary{}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("context: not a context (%v)", err)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		key, _ := t.(string)
		if key == "messages" || key == "contextEntryIds" {
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return nil, fmt.Errorf("context: %s: not an array (%v)", key, err)
			}
			for dec.More() {
				var m json.RawMessage
				if err := dec.Decode(&m); err != nil {
					return nil, fmt.Errorf("context: %w", err)
				}
				if key == "messages" {
					s.Add(m)
				} else {
					s.Entries++
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("context: %w", err)
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
		switch key {
		case "leafId":
			var id *string
			if json.Unmarshal(v, &id) == nil && id != nil {
				s.Leaf = *id
			}
		case "thinkingLevel":
			s.Thinking = v
		case "model":
			s.Model = v
		case "rules":
			json.Unmarshal(v, &s.Rules)
		case "rulesMode":
			json.Unmarshal(v, &s.RulesMode)
		}
	}
	return s, nil
}

// ModelName is a context's model as people write it, provider/model,
// rather than the JSON object pi stores ({"provider", "modelId"}).
func ModelName(raw json.RawMessage) string {
	var m struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if json.Unmarshal(raw, &m) == nil {
		// An object: {} (a message without a provider or model, which
		// printed "model {}") is no model, shown as "-".
		switch {
		case m.ModelID == "":
			return m.Provider
		case m.Provider == "":
			return m.ModelID
		}
		return m.Provider + "/" + m.ModelID
	}
	return JSONText(raw)
}

// JSONText is a JSON string's text, or the raw JSON of anything else.
func JSONText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// ContentText is a message's content as text: a string as it is, blocks
// joined, with thinking, tool calls and images marked.
func ContentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type, Text, Thinking, Name string
	}
	json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "thinking":
			parts = append(parts, "[thinking] "+b.Thinking)
		case "toolCall":
			parts = append(parts, "[tool "+b.Name+"]")
		case "image":
			parts = append(parts, "[image]")
		}
	}
	return strings.Join(parts, " ")
}

// Preview is s on one line, white space runs made one space, cut to n
// characters.
func Preview(s string, n int) string {
	s = strings.Join(strings.Fields(TerminalSafe(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// TerminalSafe is s with every control character (escape sequences, a
// carriage return), line or paragraph separator and bidirectional control
// turned to a space: session text is anyone's (a page an agent read,
// another machine of the team), and printed as it is, its escape sequences
// would drive the terminal (set the clipboard, clear the screen, rename the
// window).
func TerminalSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, s)
}

// OrDash is s, or "-" for nothing ("" or null).
func OrDash(s string) string {
	if s == "" || s == "null" {
		return "-"
	}
	return s
}

// Plural is n with the word for n of a thing: 1 entry, 3 entries.
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
