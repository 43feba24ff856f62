package session

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

var emptyArray = json.RawMessage(`[]`)

// entryMessages is sessionEntryToContextMessages (spec §7.3, rule set
// seed) for one window entry, given its raw line.
func (t *Tree) entryMessages(n *node, body []byte) ([]json.RawMessage, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil {
		return nil, fmt.Errorf("session: decode entry body: %w", err)
	}
	ts := msTimestamp(n.ts)
	switch n.typ.s {
	case "message":
		m := f["message"]
		if isAbsent(m) {
			return nil, ErrMissingMessage
		}
		msg, err := t.contextMessage(m)
		if err != nil {
			return nil, err
		}
		return []json.RawMessage{msg}, nil
	case "custom_message":
		content := f["content"]
		if isAbsent(content) {
			content = emptyArray
		}
		fs := []field{{"role", json.RawMessage(`"custom"`)}}
		fs = appendDefined(fs, "customType", f["customType"])
		fs = append(fs, field{"content", content})
		fs = appendDefined(fs, "display", f["display"])
		fs = appendDefined(fs, "details", f["details"])
		fs = append(fs, field{"timestamp", ts})
		return []json.RawMessage{encodeFields(fs)}, nil
	case "branch_summary":
		if !truthy(f["summary"]) {
			return nil, nil
		}
		fs := []field{{"role", json.RawMessage(`"branchSummary"`)}, {"summary", f["summary"]}}
		fs = appendDefined(fs, "fromId", f["fromId"])
		fs = append(fs, field{"timestamp", ts})
		return []json.RawMessage{encodeFields(fs)}, nil
	case "compaction":
		fs := []field{{"role", json.RawMessage(`"compactionSummary"`)}}
		fs = appendDefined(fs, "summary", f["summary"])
		fs = appendDefined(fs, "tokensBefore", f["tokensBefore"])
		fs = append(fs, field{"timestamp", ts})
		out := []json.RawMessage{encodeFields(fs)}
		if tail := f["retainedTail"]; isArray(tail) {
			// [seed] the retained messages follow verbatim (spec §7.7).
			var elems []json.RawMessage
			if err := json.Unmarshal(tail, &elems); err != nil {
				return nil, fmt.Errorf("session: decode retainedTail: %w", err)
			}
			out = append(out, elems...)
		}
		return out, nil
	}
	return nil, nil
}

// contextMessage returns a stored message as the context holds it: the v2
// migration's hookMessage → custom rename applied in memory, and content
// null or missing replaced by [] for user, assistant and toolResult.
func (t *Tree) contextMessage(m json.RawMessage) (json.RawMessage, error) {
	if !isObject(m) {
		return m, nil
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(m, &probe); err != nil {
		return nil, fmt.Errorf("session: decode message: %w", err)
	}
	role, _ := rawString(probe["role"])
	rename := t.version < 3 && role == "hookMessage"
	fixContent := (role == "user" || role == "assistant" || role == "toolResult") && isAbsent(probe["content"])
	if !rename && !fixContent {
		return m, nil
	}
	// Rewrite keeping member order.
	fs, err := objectFields(m)
	if err != nil {
		return nil, fmt.Errorf("session: decode message: %w", err)
	}
	role, _ = rawString(getField(fs, "role"))
	if t.version < 3 && role == "hookMessage" {
		fs = setField(fs, "role", json.RawMessage(`"custom"`))
		role = "custom"
	}
	if (role == "user" || role == "assistant" || role == "toolResult") && isAbsent(getField(fs, "content")) {
		fs = setField(fs, "content", emptyArray)
	}
	return encodeFields(fs), nil
}

func appendDefined(fs []field, key string, val json.RawMessage) []field {
	if val == nil {
		return fs
	}
	return append(fs, field{key, val})
}

// msTimestamp renders a time value; NaN is null, as JSON.stringify does.
func msTimestamp(ms float64) json.RawMessage {
	if math.IsNaN(ms) {
		return json.RawMessage("null")
	}
	return json.RawMessage(strconv.FormatFloat(ms, 'f', -1, 64))
}
