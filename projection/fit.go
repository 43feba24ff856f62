package projection

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxFieldShown is what a view keeps of a string too long for its value.
const maxFieldShown = 4 << 10

// fit makes a view's value that is over maxValue fit, when it can, by
// cutting every string in it longer than maxFieldShown: a session's name,
// a model's id, a cwd or an entry id is whatever its line says, and one of
// a MiB made every later write of the session's views fail, and the worker
// with them. A value still over the limit is returned as it is.
func fit(data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers stay as they were written
	var v any
	if err := dec.Decode(&v); err != nil {
		return data
	}
	out, err := json.Marshal(cutStrings(v))
	if err != nil {
		return data
	}
	return out
}

func cutStrings(v any) any {
	switch v := v.(type) {
	case string:
		if len(v) > maxFieldShown {
			// The decoder made v valid UTF-8: only the cut rune goes.
			return strings.ToValidUTF8(v[:maxFieldShown], "") + "…"
		}
		return v
	case []any:
		for i := range v {
			v[i] = cutStrings(v[i])
		}
	case map[string]any:
		for k, x := range v {
			v[k] = cutStrings(x)
		}
	}
	return v
}
