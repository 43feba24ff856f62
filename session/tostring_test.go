package session

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestToPrimitiveThrows: which JSON values make String(v), `${v}`, a join,
// new Date(v) and `v >= 3` throw TypeError in node (each row checked with
// node 20, docs/RULES.md): an own toString, alone or reached through
// arrays, whatever its value; never an own valueOf alone, nor an object
// inside an object.
func TestToPrimitiveThrows(t *testing.T) {
	for _, c := range []struct {
		raw    string
		throws bool
	}{
		{`{"toString":1}`, true},
		{`{"toString":null}`, true},
		{`{"to\u0053tring":1}`, true},
		{`{"toString":1,"toString":2}`, true},
		{`{"valueOf":1,"toString":2}`, true},
		{` [{"toString":1}] `, true},
		{`[[1,"]",[{"toString":{}}]]]`, true},
		{`{"valueOf":1}`, false},
		{`[null,{"valueOf":1}]`, false},
		{`[{"a":{"toString":1}}]`, false},
		{`{"a":{"toString":1}}`, false},
		{`{"__proto__":{"toString":1}}`, false},
		{`{"tostring":1}`, false},
		{`"toString"`, false},
		{`["{\"toString\":1}"]`, false},
		{`1`, false},
		{``, false},
	} {
		if got := toPrimitiveThrows(json.RawMessage(c.raw)); got != c.throws {
			t.Errorf("toPrimitiveThrows(%s) = %v, want %v", c.raw, got, c.throws)
		}
		if got := dateThrows(json.RawMessage(c.raw)); got != c.throws {
			t.Errorf("dateThrows(%s) = %v, want %v", c.raw, got, c.throws)
		}
	}
}

// TestSummarizeToString: pi's listAll skips a file whose conversions throw
// (new Date of the header's or a message entry's timestamp, the join of a
// text block's text) and lists the others; each row is what
// `pi-oracle list` gave for the file.
func TestSummarizeToString(t *testing.T) {
	const hdr = `{"type":"session","version":3,"id":"s","cwd":"/x","timestamp":`
	const iso = `"2026-01-01T00:00:00.000Z"`
	for _, c := range []struct {
		name, file string
		listed     bool
	}{
		{"header timestamp toString", hdr + `{"toString":1}}` + "\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":` + iso + `,"message":{"role":"user","content":"q","timestamp":1}}`, false},
		{"header timestamp valueOf", hdr + `{"valueOf":1}}` + "\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":` + iso + `,"message":{"role":"user","content":"q","timestamp":1}}`, true},
		{"entry timestamp", hdr + iso + "}\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":[{"toString":1}],"message":{"role":"user","content":"q"}}`, false},
		{"entry timestamp unused", hdr + iso + "}\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":[{"toString":1}],"message":{"role":"user","content":"q","timestamp":5}}`, true},
		{"entry timestamp tool result", hdr + iso + "}\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":{"toString":1},"message":{"role":"toolResult","content":"q"}}`, true},
		{"text toString", hdr + iso + "}\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":` + iso + `,"message":{"role":"user","content":[{"type":"text","text":{"toString":1}}],"timestamp":5}}`, false},
		{"text valueOf", hdr + iso + "}\n" +
			`{"type":"message","id":"a1","parentId":null,"timestamp":` + iso + `,"message":{"role":"assistant","content":[{"type":"text","text":[{"valueOf":1}]}],"timestamp":5}}`, true},
	} {
		s, ok, err := Summarize(bytes.NewReader([]byte(c.file+"\n")), 0)
		if err != nil {
			t.Fatal(err)
		}
		if ok != c.listed {
			t.Errorf("%s: listed = %v, want %v", c.name, ok, c.listed)
		}
		if c.name == "text valueOf" && ok && string(s.AllMessagesText) != "[object Object]" {
			t.Errorf("%s: allMessagesText %q", c.name, s.AllMessagesText)
		}
	}
}
