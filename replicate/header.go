package replicate

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// mapHeader rewrites the header line's top-level "cwd" and "parentSession"
// through m, keeping every other byte (key order, unknown fields, spacing):
// the line stays pi's own but points at this machine's paths. It returns
// the new line and the header's mapped cwd.
func mapHeader(raw []byte, m PathMap) ([]byte, string, error) {
	var cwd string
	out, err := rewriteTopLevel(raw, func(key string, val json.RawMessage) (json.RawMessage, error) {
		if key != "cwd" && key != "parentSession" {
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return nil, nil // not a string: leave it as pi wrote it
		}
		mapped := m.Map(s)
		if key == "cwd" {
			cwd = mapped
		}
		if mapped == s {
			return nil, nil
		}
		return marshalJS(mapped)
	})
	if err != nil {
		return nil, "", err
	}
	if cwd == "" {
		return nil, "", fmt.Errorf("%w: header has no string cwd", ErrUnsafe)
	}
	return out, cwd, nil
}

// marshalJS encodes a string as JSON.stringify would: no HTML escaping.
func marshalJS(s string) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// rewriteTopLevel calls f for each top-level member of the JSON object raw;
// a non-nil result replaces that member's value in place.
func rewriteTopLevel(raw []byte, f func(key string, val json.RawMessage) (json.RawMessage, error)) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("replicate: header is not a JSON object")
	}
	type splice struct {
		start, end int64
		val        json.RawMessage
	}
	var edits []splice
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("replicate: header: %w", err)
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("replicate: header: %w", err)
		}
		end := dec.InputOffset()
		nv, err := f(key, val)
		if err != nil {
			return nil, err
		}
		if nv != nil {
			edits = append(edits, splice{end - int64(len(val)), end, nv})
		}
	}
	if len(edits) == 0 {
		return raw, nil
	}
	var out bytes.Buffer
	prev := int64(0)
	for _, e := range edits {
		out.Write(raw[prev:e.start])
		out.Write(e.val)
		prev = e.end
	}
	out.Write(raw[prev:])
	return out.Bytes(), nil
}
