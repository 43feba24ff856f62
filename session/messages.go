package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

var emptyArray = json.RawMessage(`[]`)

// bodyFields are the members of an entry body that rendering reads, as raw
// values (nil when absent; the last duplicate wins, as in JSON.parse).
type bodyFields struct {
	message, content, customType, display, details json.RawMessage
	summary, fromID, tokensBefore, retainedTail    json.RawMessage
	systemMessage, replacement                     json.RawMessage
	// role and content of message, when it is an object.
	msgRole, msgContent json.RawMessage
}

// scanBody validates an entry body and picks its fields in one pass,
// descending into an object message for its role and content. The values
// alias body: a stored message is passed on untouched, with its key
// order, spacing and unknown fields, and is never decoded.
func scanBody(body []byte) (bodyFields, error) {
	var f bodyFields
	e, err := scanMembers(body, skipWS(body, 0), func(k []byte, at int) (int, error) {
		if string(k) == "message" && body[at] == '{' {
			var role, content json.RawMessage
			ve, err := scanMembers(body, at, func(k []byte, at int) (int, error) {
				ve, err := skipValue(body, at)
				switch string(k) {
				case "role":
					role = body[at:ve:ve]
				case "content":
					content = body[at:ve:ve]
				}
				return ve, err
			})
			f.message, f.msgRole, f.msgContent = body[at:ve:ve], role, content
			return ve, err
		}
		ve, err := skipValue(body, at)
		if err != nil {
			return 0, err
		}
		v := json.RawMessage(body[at:ve:ve])
		switch string(k) {
		case "message":
			f.message = v
		case "content":
			f.content = v
		case "customType":
			f.customType = v
		case "display":
			f.display = v
		case "details":
			f.details = v
		case "summary":
			f.summary = v
		case "fromId":
			f.fromID = v
		case "tokensBefore":
			f.tokensBefore = v
		case "retainedTail":
			f.retainedTail = v
		case "systemMessage":
			f.systemMessage = v
		case "replacement":
			f.replacement = v
		}
		return ve, nil
	})
	if err != nil {
		return f, err
	}
	return f, end(body, e)
}

// entryMessages is sessionEntryToContextMessages (spec §7.3) under the
// rule set r for one window entry, given its raw line. It appends the
// entry's messages to dst.
func (t *Tree) entryMessages(dst []json.RawMessage, n *node, body []byte, r RuleSet) ([]json.RawMessage, error) {
	return entryMessages(dst, n, body, r, t.version)
}

// entryMessages is Tree.entryMessages for a tree of the given header
// version.
func entryMessages(dst []json.RawMessage, n *node, body []byte, r RuleSet, version float64) ([]json.RawMessage, error) {
	f, err := scanBody(body)
	if err != nil {
		return dst, fmt.Errorf("session: decode entry body: %w", err)
	}
	// custom_message, branch_summary and compaction messages take their
	// timestamp from new Date(entry.timestamp), which may throw.
	badDate := n.flags&flagBadDate != 0
	switch n.typ.s {
	case "message":
		if isAbsent(f.message) {
			return dst, ErrMissingMessage
		}
		msg, err := contextMessage(f.message, f.msgRole, f.msgContent, r, version)
		if err != nil {
			return dst, err
		}
		return append(dst, msg), nil
	case "custom_message":
		if badDate {
			return dst, ErrDate
		}
		content := f.content
		if isAbsent(content) {
			content = emptyArray
		}
		fs := []field{{"role", json.RawMessage(`"custom"`)}}
		fs = appendDefined(fs, "customType", f.customType)
		fs = append(fs, field{"content", content})
		fs = appendDefined(fs, "display", f.display)
		fs = appendDefined(fs, "details", f.details)
		fs = append(fs, field{"timestamp", msTimestamp(n.ts)})
		return append(dst, encodeFields(fs)), nil
	case "branch_summary":
		if !truthy(f.summary) {
			return dst, nil
		}
		if badDate {
			return dst, ErrDate
		}
		fs := []field{{"role", json.RawMessage(`"branchSummary"`)}, {"summary", f.summary}}
		fs = appendDefined(fs, "fromId", f.fromID)
		fs = append(fs, field{"timestamp", msTimestamp(n.ts)})
		return append(dst, encodeFields(fs)), nil
	case "compaction":
		if r == RulesPi16 && truthy(f.systemMessage) {
			// [1.6] the system prompt at compaction time comes first.
			dst = append(dst, f.systemMessage)
		}
		if badDate {
			return dst, ErrDate
		}
		fs := []field{{"role", json.RawMessage(`"compactionSummary"`)}}
		fs = appendDefined(fs, "summary", f.summary)
		fs = appendDefined(fs, "tokensBefore", f.tokensBefore)
		fs = append(fs, field{"timestamp", msTimestamp(n.ts)})
		dst = append(dst, encodeFields(fs))
		if r == RulesSeed && isArray(f.retainedTail) {
			// [seed] the retained messages follow verbatim (spec §7.7).
			if err := eachElement(f.retainedTail, func(v []byte) { dst = append(dst, v) }); err != nil {
				return dst, fmt.Errorf("session: decode retainedTail: %w", err)
			}
		}
		return dst, nil
	}
	return dst, nil
}

// contextMessage returns a stored message m (with its role and content as
// scanBody found them) as the context holds it: the v2 migration's
// hookMessage → custom rename applied in memory, and content null or
// missing replaced by [] for user, assistant and toolResult ([1.6] by ""
// for system). Only those cases rewrite the message; otherwise it is
// returned as stored.
func contextMessage(m, roleRaw, content json.RawMessage, r RuleSet, version float64) (json.RawMessage, error) {
	if !isObject(m) {
		return m, nil
	}
	role, _ := quickString(roleRaw)
	rename := version < 3 && role == "hookMessage"
	fixContent := (role == "user" || role == "assistant" || role == "toolResult") && isAbsent(content)
	fixSystem := r == RulesPi16 && role == "system" && isAbsent(content)
	if !rename && !fixContent && !fixSystem {
		return m, nil
	}
	// Rewrite keeping member order. The scan above read the same members
	// (last duplicate wins, as here), so its verdicts hold; a renamed
	// message is "custom" and never needs the content fix.
	fs, err := objectFields(m)
	if err != nil {
		return nil, fmt.Errorf("session: decode message: %w", err)
	}
	if rename {
		fs = setField(fs, "role", json.RawMessage(`"custom"`))
	}
	if fixContent {
		fs = setField(fs, "content", emptyArray)
	}
	if fixSystem {
		fs = setField(fs, "content", json.RawMessage(`""`))
	}
	return encodeFields(fs), nil
}

// editMessages applies a context_edit (its raw line) to the messages one
// window entry produced, as pi 1.6's projectContextEntry does: messages of
// role user, assistant, toolResult and custom get replacement.content (a
// string becomes one text block for assistant and toolResult; undefined
// drops the key), others stay. A null replacement never gets here.
func editMessages(msgs []json.RawMessage, edit []byte) error {
	f, err := scanBody(edit)
	if err != nil {
		return fmt.Errorf("session: decode context_edit: %w", err)
	}
	var content json.RawMessage // undefined unless replacement is an object with content
	if isObject(f.replacement) {
		rf, err := objectMap(f.replacement)
		if err != nil {
			return fmt.Errorf("session: decode context_edit: %w", err)
		}
		content = rf["content"]
	}
	for k, m := range msgs {
		if !isObject(m) {
			continue
		}
		fs, err := objectFields(m)
		if err != nil {
			return fmt.Errorf("session: decode message: %w", err)
		}
		role, _ := rawString(getField(fs, "role"))
		if !editableRole(role) {
			continue
		}
		c := content
		if s, ok := rawString(c); ok && (role == "assistant" || role == "toolResult") {
			c = textBlocks(s)
		}
		msgs[k] = encodeFields(setField(fs, "content", c))
	}
	return nil
}

// quickString is rawString for a value that is already trimmed, without
// the decoder when the string has no escapes (the usual case).
func quickString(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	return rawString(raw)
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
