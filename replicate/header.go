package replicate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// mapHeader rewrites the header line's top-level "cwd" and "parentSession"
// through m, keeping every other byte (key order, unknown fields, spacing):
// the line stays pi's own but points at this machine's paths. It returns
// the new line and the header's mapped cwd.
//
// A parentSession in a project folder of the machine that wrote the
// session (its own file there is originFile, relative to that machine's
// sessions root) names this machine's copy of the parent instead: pi lists
// a fork under its parent by that path. pi's /fork and /clone write the new
// file beside the old one, and both copies land here in the folder of the
// mapped cwd, under root, which need not be the other machine's sessions
// root mapped (another user, PI_CODING_AGENT_DIR). A fork into another
// project's folder names the parent in that project's folder, whose name
// here is m's mapping of it (PathMap.MapFolder): mapped as a path, it named
// the other machine's folder under this machine's root, which no file here
// is in (a probe, 2026-12-07). Any other parentSession is mapped through m.
func mapHeader(raw []byte, m PathMap, root, originFile string) ([]byte, string, error) {
	var cwd json.RawMessage
	if _, err := rewriteTopLevel(raw, func(key string, val json.RawMessage) (json.RawMessage, error) {
		if key == "cwd" {
			cwd = val // the last cwd, as JSON.parse takes it, whatever it holds
		}
		return nil, nil
	}); err != nil {
		return nil, "", fmt.Errorf("%w: header: %v", ErrUnsafe, err)
	}
	var c string
	switch {
	case cwd == nil:
		return nil, "", fmt.Errorf("%w: the header has no cwd", ErrUnsafe)
	case json.Unmarshal(cwd, &c) != nil:
		return nil, "", fmt.Errorf("%w: the header's cwd is %s, not a path", ErrUnsafe, clip(cwd))
	case c == "":
		return nil, "", fmt.Errorf("%w: the header's cwd is empty", ErrUnsafe)
	}
	mappedCwd := m.Map(c)
	out, err := rewriteTopLevel(raw, func(key string, val json.RawMessage) (json.RawMessage, error) {
		if key != "cwd" && key != "parentSession" {
			return nil, nil
		}
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			return nil, nil // not a string: leave it as pi wrote it
		}
		mapped := m.Map(s)
		if key == "parentSession" {
			if p, ok := parentHere(s, m, root, originFile, mappedCwd); ok {
				mapped = p
			}
		}
		if mapped == s {
			return nil, nil
		}
		return marshalJS(mapped)
	})
	if err != nil {
		return nil, "", fmt.Errorf("%w: header: %v", ErrUnsafe, err)
	}
	return out, mappedCwd, nil
}

// parentHere is the path here of parent, a session file on the machine
// that wrote originFile, when parent lies in a project folder there: the
// same name, in the folder of cwd (the session's mapped cwd) when parent is
// beside originFile, else in the folder here of the parent's own.
func parentHere(parent string, m PathMap, root, originFile, cwd string) (string, bool) {
	folder, name, ok := strings.Cut(originFile, "/")
	if !ok || root == "" || folder == "" || strings.Contains(name, "/") {
		return "", false
	}
	// The other machine may write its paths with either separator.
	dir, pname := path.Split(strings.ReplaceAll(parent, `\`, "/"))
	if !fileNamePattern().MatchString(pname) {
		return "", false
	}
	var here string
	switch pfolder := path.Base(dir); {
	case pfolder == folder:
		here = CwdFolder(cwd)
	case isFolderName(pfolder):
		here = m.MapFolder(pfolder)
	default:
		return "", false
	}
	p := filepath.Join(root, here, pname)
	if inside(root, p) != nil {
		return "", false
	}
	return p, true
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

// clip is v for a message: at most 40 bytes of it, which is what a reader
// of a log line needs of a value that is not a path.
func clip(v []byte) string {
	if len(v) > 40 {
		return string(bytes.ToValidUTF8(v[:40], nil)) + "…"
	}
	return string(v)
}
