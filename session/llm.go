package session

import (
	"encoding/json"
	"errors"
	"fmt"
)

const (
	compactionSummaryPrefix = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
	compactionSummarySuffix = "\n</summary>"
	branchSummaryPrefix     = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
	branchSummarySuffix     = "</summary>"
)

// ConvertToLLM is pi's convertToLlm (spec §7.6) under the rule set r: what
// of the context messages reaches the model. A message that is null makes
// pi throw. [1.6] system messages pass through; the seed rules drop them.
func ConvertToLLM(r RuleSet, msgs []json.RawMessage) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(msgs))
	for k, m := range msgs {
		if isAbsent(m) {
			return nil, fmt.Errorf("session: convert message %d: null message", k)
		}
		if !isObject(m) {
			continue // m.role is undefined: dropped
		}
		f, err := objectMap(m)
		if err != nil {
			return nil, fmt.Errorf("session: convert message %d: %w", k, err)
		}
		role, _ := rawString(f["role"])
		switch role {
		case "user", "assistant", "toolResult":
			out = append(out, m)
		case "system":
			if r == RulesPi16 {
				out = append(out, m)
			}
		case "bashExecution":
			if truthy(f["excludeFromContext"]) {
				continue
			}
			var t templater
			text := bashExecutionText(&t, f)
			if t.err != nil {
				return nil, fmt.Errorf("session: convert message %d: %w", k, t.err)
			}
			out = append(out, userText(text, f["timestamp"]))
		case "custom":
			content := f["content"]
			if s, ok := rawString(content); ok {
				content = textBlocks(s)
			}
			fs := []field{{"role", json.RawMessage(`"user"`)}}
			fs = appendDefined(fs, "content", content)
			fs = appendDefined(fs, "timestamp", f["timestamp"])
			out = append(out, encodeFields(fs))
		case "branchSummary", "compactionSummary":
			var t templater
			summary := t.str(f["summary"])
			if t.err != nil {
				return nil, fmt.Errorf("session: convert message %d: %w", k, t.err)
			}
			if role == "branchSummary" {
				out = append(out, userText(branchSummaryPrefix+summary+branchSummarySuffix, f["timestamp"]))
			} else {
				out = append(out, userText(compactionSummaryPrefix+summary+compactionSummarySuffix, f["timestamp"]))
			}
		}
	}
	return out, nil
}

func textBlocks(s string) json.RawMessage {
	b := append([]byte(`[{"type":"text","text":`), jsonQuote(s)...)
	return append(b, '}', ']')
}

func userText(text string, ts json.RawMessage) json.RawMessage {
	fs := []field{{"role", json.RawMessage(`"user"`)}, {"content", textBlocks(text)}}
	return encodeFields(appendDefined(fs, "timestamp", ts))
}

// bashExecutionText is pi's bashExecutionToText.
func bashExecutionText(t *templater, f map[string]json.RawMessage) string {
	text := "Ran `" + t.str(f["command"]) + "`\n"
	if truthy(f["output"]) {
		text += "```\n" + t.str(f["output"]) + "\n```"
	} else {
		text += "(no output)"
	}
	if truthy(f["cancelled"]) {
		text += "\n\n(command cancelled)"
	} else if code := f["exitCode"]; !isAbsent(code) && !(isNumberRaw(code) && jsToNumber(code) == 0) {
		text += "\n\nCommand exited with code " + t.str(code)
	}
	if truthy(f["truncated"]) && truthy(f["fullOutputPath"]) {
		text += "\n\n[Output truncated. Full output: " + t.str(f["fullOutputPath"]) + "]"
	}
	return text
}

// ErrTooDeep means pi throws turning a value into a string: an array
// nested deeper than piJoinDepth overflows the stack of the recursive join.
var ErrTooDeep = errors.New("session: value nested too deep to convert to a string")

// ErrToString means pi throws TypeError turning a value into a string: an
// object with an own toString member, alone or inside arrays
// (toPrimitiveThrows).
var ErrToString = errors.New("session: value cannot be converted to a string (an own toString member)")

// templater applies jsTemplate and remembers where pi would throw.
type templater struct{ err error }

func (t *templater) str(raw json.RawMessage) string {
	if arrayChainDepth(raw) > piJoinDepth {
		t.err = ErrTooDeep
		return ""
	}
	if toPrimitiveThrows(raw) {
		t.err = ErrToString
		return ""
	}
	return jsTemplate(raw)
}

// jsTemplate is String(x) as a template literal applies it.
func jsTemplate(raw json.RawMessage) string {
	raw = trimWS(raw)
	switch {
	case len(raw) == 0:
		return "undefined"
	case raw[0] == 'n':
		return "null"
	}
	return jsJoinString(raw)
}

// LLMMessages is ConvertToLLM of the context's messages under its rules.
func (c *Context) LLMMessages() ([]json.RawMessage, error) { return ConvertToLLM(c.Rules, c.Messages) }
