package main

import (
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
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("context: %w", err)
	}
	f, err := session.LoadRules(data, mode)
	if err != nil {
		return fmt.Errorf("context: %s: %w", pos[0], err)
	}
	var at *string
	if *leaf != "" {
		at = leaf
	}
	var c *session.Context
	if at == nil {
		c, err = f.Context()
	} else {
		c, err = f.ContextAt(at)
	}
	if err != nil {
		return fmt.Errorf("context: %s: %w", pos[0], err)
	}
	if *asJSON {
		out, err := projection.ContextJSON(c, mode)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	return printContext(stdout, c, rulesNote(c.Rules.String(), mode.String()))
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

// printContext is the human form: one line per message, role and a
// preview, after the leaf and the rule set.
func printContext(w io.Writer, c *session.Context, rules string) error {
	leaf, _ := c.LeafID.String()
	fmt.Fprintf(w, "leaf %s, %d entries in the window, %d messages, model %s, thinking %s\n",
		orDash(leaf), len(c.EntryIDs), len(c.Messages), orDash(modelName(c.Model)), orDash(jsonText(c.ThinkingLevel)))
	if rules != "" {
		fmt.Fprintln(w, rules)
	}
	for i, m := range c.Messages {
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
		fmt.Fprintf(w, "%3d %-18s %s\n", i+1, orDash(msg.Role), preview(text, 100))
	}
	return nil
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
