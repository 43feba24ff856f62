package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/projection"
	"github.com/pisyncd/pisyncd/session"
)

// contextFileCommand is `pisyncd context FILE`: pi's rules applied to the
// file directly, no daemon needed.
func contextFileCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("context", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, contextJSONUsage)
	leaf := fs.String("leaf", "", "build the context at this entry id instead of the file's leaf")
	rules := fs.String("rules", "", contextRulesUsage)
	if err := parseArgs(fs, reorder(args, contextValued...), contextUsage, 1); err != nil {
		return err
	}
	mode, err := contextRules(*rules)
	if err != nil {
		return err
	}
	if *rules == "" {
		// PISYNC_RULES alone: `context FILE` needs no other setting.
		if mode, err = config.LoadRules(); err != nil {
			return err
		}
	}
	pos := fs.Args()
	// Read line by line; the window's bodies are read back from the file
	// as the context is written, so a file of any size costs its lines'
	// metadata and one line at a time.
	file, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	f, err := session.ReadSpans(file, st.Size(), mode)
	if err != nil {
		return fmt.Errorf("context: %s: %w", pos[0], err)
	}
	var ix *session.Index
	if *leaf == "" {
		ix, err = f.Tree.Index()
	} else {
		ix, err = f.Tree.IndexAt(leaf)
	}
	if err != nil {
		return fmt.Errorf("context: %s: %w", pos[0], err)
	}
	if *asJSON {
		// Held back up to 1 MiB, so a failure prints nothing unless the
		// context is larger.
		bw := bufio.NewWriterSize(stdout, 1<<20)
		if err := projection.WriteContextJSON(bw, ix, f, mode); err != nil {
			return fmt.Errorf("context: %s: %w", pos[0], err)
		}
		bw.WriteByte('\n')
		return bw.Flush()
	}
	leafID, _ := ix.LeafID.String()
	sum := &contextSummary{leaf: leafID, entries: len(ix.EntryIDs), model: ix.Model, thinking: ix.ThinkingLevel,
		rules: ix.Rules.String(), rulesMode: mode.String()}
	err = ix.EachMessage(f, func(m json.RawMessage) error {
		sum.add(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("context: %s: %w", pos[0], err)
	}
	return sum.print(stdout)
}

// contextSummary is what the human form shows of a context: the lines of
// its messages are short previews, so a context of any size fits.
type contextSummary struct {
	leaf            string
	entries         int
	model, thinking json.RawMessage
	rules           string // the set used; "" when the daemon did not say
	rulesMode       string // the set asked for
	lines           []string
}

// Flag texts and the valued flags (reorder) both context commands share.
const (
	contextJSONUsage  = `print {rules, rulesMode, leafId, contextEntryIds, messages, thinkingLevel, model}`
	contextRulesUsage = "the context rules: auto, seed or pi-1.6 (default: PISYNC_RULES, else auto; docs/RULES.md)"
)

var contextValued = []string{"leaf", "rules"}

// contextRules reads --rules; "" (not given) is RulesAuto, which the
// caller replaces by the configured set.
func contextRules(s string) (session.RuleSet, error) {
	if s == "" {
		return session.RulesAuto, nil
	}
	r, err := session.ParseRuleSet(s)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("context: --rules %q: want auto, seed or pi-1.6", s), usage: contextUsage}
	}
	return r, nil
}

// rulesNote is the human form's line about the rule set: the one used
// (rules) and the one asked for (mode), "" when the daemon did not say.
func rulesNote(rules, mode string) string {
	switch {
	case rules == "":
		return ""
	case mode != session.RulesAuto.String():
		return "rules " + rules + " (set by --rules or PISYNC_RULES)"
	case rules == session.RulesPi16.String():
		return "rules " + rules + " (auto-chosen: the session holds a line only pi >= 0.86 writes)"
	}
	return "rules " + rules + " (auto-chosen: no line only pi >= 0.86 writes)"
}

// add adds the preview line of a message.
func (s *contextSummary) add(m json.RawMessage) {
	var msg struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Summary string          `json:"summary"`
		Command string          `json:"command"`
	}
	json.Unmarshal(m, &msg)
	text := msg.Summary + msg.Command
	if text == "" {
		text = contentText(msg.Content)
	}
	s.lines = append(s.lines, fmt.Sprintf("%3d %-18s %s", len(s.lines)+1, orDash(msg.Role), preview(text, 100)))
}

func (s *contextSummary) print(w io.Writer) error {
	fmt.Fprintf(w, "leaf %s, %d entries in the window, %d messages, model %s, thinking %s\n",
		orDash(s.leaf), s.entries, len(s.lines), orDash(modelName(s.model)), orDash(jsonText(s.thinking)))
	if note := rulesNote(s.rules, s.rulesMode); note != "" {
		fmt.Fprintln(w, note)
	}
	for _, l := range s.lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// readContextSummary reads a context in the corpus shape (as the daemon
// sends it) one message at a time. Ids other than strings show as null.
func readContextSummary(r io.Reader) (*contextSummary, error) {
	dec := json.NewDecoder(r)
	s := &contextSummary{}
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
					s.add(m)
				} else {
					s.entries++
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
				s.leaf = *id
			}
		case "thinkingLevel":
			s.thinking = v
		case "model":
			s.model = v
		case "rules":
			json.Unmarshal(v, &s.rules)
		case "rulesMode":
			json.Unmarshal(v, &s.rulesMode)
		}
	}
	return s, nil
}

// modelName is a context's model as people write it, provider/model,
// rather than the JSON object pi stores ({"provider", "modelId"}).
func modelName(raw json.RawMessage) string {
	var m struct {
		Provider string `json:"provider"`
		ModelID  string `json:"modelId"`
	}
	if json.Unmarshal(raw, &m) == nil && m.ModelID != "" {
		if m.Provider == "" {
			return m.ModelID
		}
		return m.Provider + "/" + m.ModelID
	}
	return jsonText(raw)
}

// jsonText is a JSON string's text, or the raw JSON of anything else.
func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func contentText(raw json.RawMessage) string {
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

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" || s == "null" {
		return "-"
	}
	return s
}
