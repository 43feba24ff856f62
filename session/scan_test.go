package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pisyncd/pisyncd/internal/testenv"
)

// entryMessagesRef is the map-decoding implementation of entryMessages
// that the scanner replaced, kept as the reference it must match:
// sessionEntryToContextMessages (spec §7.3, rule set
// seed) for one window entry, given its raw line.
func (t *Tree) entryMessagesRef(n *node, body []byte) ([]json.RawMessage, error) {
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
		msg, err := t.contextMessageRef(m)
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

// contextMessageRef is the reference contextMessage: it returns a stored message as the context holds it: the v2
// migration's hookMessage → custom rename applied in memory, and content
// null or missing replaced by [] for user, assistant and toolResult.
func (t *Tree) contextMessageRef(m json.RawMessage) (json.RawMessage, error) {
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

// checkScanAgainstRef renders every message-producing entry of a file with
// both implementations and requires identical bytes (or both failing).
func checkScanAgainstRef(t *testing.T, raw []byte) {
	f, err := LoadRules(raw, RulesSeed)
	if err != nil {
		return
	}
	tr := f.Tree
	for i := range tr.nodes {
		n := &tr.nodes[i]
		if !producesMessages(n) {
			continue
		}
		body, _ := f.Body(n.ref)
		want, werr := tr.entryMessagesRef(n, body)
		got, gerr := tr.entryMessages(nil, n, body, RulesSeed)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("entry %d: error %v, reference %v", i, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if fmt.Sprintf("%s", got) != fmt.Sprintf("%s", want) {
			t.Fatalf("entry %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestScanMatchesReference(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.ConformanceDir(t), "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no corpus")
	}
	for _, name := range files {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		checkScanAgainstRef(t, raw)
	}
	checkScanAgainstRef(t, synthSession(3000))
}

func FuzzScanMatchesReference(f *testing.F) {
	addCorpusSeeds(f, false)
	f.Fuzz(func(t *testing.T, raw []byte) { checkScanAgainstRef(t, raw) })
}

// FuzzEachMember: the scanner accepts what encoding/json accepts and
// yields the same members.
func FuzzEachMember(f *testing.F) {
	addCorpusSeeds(f, true)
	for _, s := range []string{`{}`, `{"a":1,"a":[1,{"b":null}]}`, `{"\u0061":"x\n"}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x"}`, ` {"a" : true } `, `{"a":tru}`, `[1,2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want map[string]json.RawMessage
		werr := json.Unmarshal(raw, &want)
		if werr == nil && want == nil {
			return // null: not an object to the scanner
		}
		got := map[string]json.RawMessage{}
		gerr := eachMember(raw, func(k, v []byte) { got[string(k)] = v })
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%q: error %v, encoding/json %v", raw, gerr, werr)
		}
		if werr != nil {
			return
		}
		if !utf8.Valid(raw) {
			// Keys with invalid UTF-8 decode as pi decodes them (a cut
			// sequence is one U+FFFD, as TextDecoder gives), where
			// encoding/json gives one U+FFFD per byte: its keys are no
			// oracle there, and keys that differ may also merge
			// differently. The differential tests against real pi check
			// that decoding; here only the errors are compared.
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, encoding/json %d", raw, len(got), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: member %q = %s, encoding/json %s", raw, k, got[k], v)
			}
		}
	})
}

// jsArrayStringRef is String(array) joined level by level, as pi's join
// recurses: the form jsArrayString replaced, kept as its reference.
func jsArrayStringRef(raw json.RawMessage) string {
	var parts []string
	if eachElement(raw, func(e []byte) {
		if e[0] == '[' {
			parts = append(parts, jsArrayStringRef(e))
		} else {
			parts = append(parts, jsJoinString(e))
		}
	}) != nil {
		return ""
	}
	return strings.Join(parts, ",")
}

func TestJSArrayString(t *testing.T) {
	deep := strings.Repeat("[", 100000) + `"x"` + strings.Repeat("]", 100000)
	for in, want := range map[string]string{
		`[]`:                                  "",
		`[[]]`:                                "",
		`[1,[],2]`:                            "1,,2",
		` [ 1 , [ 2 , [ ] ] , null , true ] `: "1,2,,,true",
		`[[1,2],[3],{"a":[4,5]},"a,[b]"]`:     "1,2,3,[object Object],a,[b]",
		`["\u0061\ud800",1e2,-0,1.50,false]`:  "a\xed\xa0\x80,100,0,1.5,false",
		`[[[{}]],[[[]]]]`:                     "[object Object],",
		`[1,`:                                 "",
		`{"a":1}`:                             "",
		deep:                                  "x",
	} {
		if got := jsArrayString(json.RawMessage(in)); got != want {
			t.Errorf("jsArrayString(%.40s) = %q, want %q", in, got, want)
		}
		if len(in) < 1000 {
			if ref := jsArrayStringRef(json.RawMessage(in)); ref != want {
				t.Errorf("reference(%s) = %q, want %q", in, ref, want)
			}
		}
	}
}

// FuzzJSArrayString: the one-pass join equals the level-by-level one.
func FuzzJSArrayString(f *testing.F) {
	for _, s := range []string{`[]`, `[1,[],2]`, `[[1,2],[3],{"a":[4,5]},"a,[b]"]`, `[null,[null,[true]],"\ud800"]`, `[1,`, `[[[ ]] , [ ] ]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if got, want := jsArrayString(raw), jsArrayStringRef(raw); got != want {
			t.Fatalf("%q: %q, level by level %q", raw, got, want)
		}
	})
}
