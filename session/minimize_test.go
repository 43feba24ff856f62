package session

import (
	"bytes"
	"strings"
	"testing"
)

// minimize shrinks raw while bad(raw) holds: delta debugging over lines
// (each with its own line ending), then over the JSON values of each line
// (members and elements dropped, values replaced by null, containers by
// a child, deep nesting halved). It asks bad at most budget times.
func minimize(raw []byte, bad func([]byte) bool, budget int) []byte {
	calls := 0
	try := func(b []byte) bool {
		if calls >= budget {
			return false
		}
		calls++
		return bad(b)
	}
	lines := splitKeep(raw)
	// ddmin over lines: drop chunks of halving size.
	for chunk := len(lines) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(lines); {
			cand := append(append([][]byte{}, lines[:i]...), lines[i+chunk:]...)
			if len(cand) > 0 && try(bytes.Join(cand, nil)) {
				lines = cand
				continue
			}
			i += chunk
		}
	}
	// values within each line
	for li := range lines {
		body, ending := cutEnding(lines[li])
		parsed, err := parseJ(body)
		if err != nil {
			continue
		}
		v := jarr{parsed} // a holder, so that the line's value is a slot too
		rebuild := func() []byte {
			cand := append([][]byte{}, lines...)
			cand[li] = append(encodeJSONLine(v[0]), ending...)
			return bytes.Join(cand, nil)
		}
		for progress := true; progress && calls < budget; {
			progress = false
			for _, o := range objectsOf(v, nil) {
				for k := 0; k < len(o.kv); k++ {
					saved := o.kv
					o.kv = append(append([]jkv{}, saved[:k]...), saved[k+1:]...)
					if try(rebuild()) {
						progress = true
						k--
						continue
					}
					o.kv = saved
				}
			}
			for _, s := range slotsOf(v, nil) {
				if progress {
					break // the slots below a replaced value are gone: walk again
				}
				old := s.get()
				cands := simpler(old)
				if a, ok := old.(jarr); ok {
					for k := range a {
						cands = append(cands, append(append(jarr{}, a[:k]...), a[k+1:]...))
					}
				}
				for _, repl := range cands {
					s.set(repl)
					if try(rebuild()) {
						progress = true
						break
					}
					s.set(old)
				}
			}
		}
		lines[li] = append(encodeJSONLine(v[0]), ending...)
	}
	return bytes.Join(lines, nil)
}

// simpler lists smaller stand-ins for v: null, and for a container a
// descendant halfway down its first-child chain, then its first child.
func simpler(v any) []any {
	var out []any
	if r, ok := v.(jraw); !ok || r != "null" {
		out = append(out, jraw("null"))
	}
	var chain []any
	for x := v; ; {
		var next any
		switch c := x.(type) {
		case *jobj:
			if len(c.kv) > 0 {
				next = c.kv[0].v
			}
		case jarr:
			if len(c) > 0 {
				next = c[0]
			}
		}
		if next == nil {
			break
		}
		chain = append(chain, next)
		x = next
	}
	if len(chain) > 2 {
		out = append(out, chain[len(chain)/2])
	}
	if len(chain) > 0 {
		out = append(out, chain[0])
	}
	return out
}

// splitKeep splits after each '\n', keeping it.
func splitKeep(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

func cutEnding(l []byte) ([]byte, []byte) {
	body := bytes.TrimRight(l, "\r\n")
	return body, l[len(body):]
}

// parseJ parses one JSON value into the generator's form: scalars stay
// jraw, spelled as they were; keys are decoded.
func parseJ(b []byte) (any, error) {
	i := skipWS(b, 0)
	v, e, err := parseJAt(b, i)
	if err != nil {
		return nil, err
	}
	if skipWS(b, e) != len(b) {
		return nil, errSyntax
	}
	return v, nil
}

func parseJAt(b []byte, i int) (any, int, error) {
	if i >= len(b) {
		return nil, 0, errSyntax
	}
	switch b[i] {
	case '{':
		o := &jobj{}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return o, i + 1, nil
		}
		for {
			ke, err := skipKey(b, i)
			if err != nil {
				return nil, 0, err
			}
			se, _, _ := skipString(b, i)
			k, _ := jsString(b[i:se])
			v, e, err := parseJAt(b, ke)
			if err != nil {
				return nil, 0, err
			}
			o.kv = append(o.kv, jkv{k, v})
			i = skipWS(b, e)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return o, i + 1, nil
			}
			return nil, 0, errSyntax
		}
	case '[':
		a := jarr{}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return a, i + 1, nil
		}
		for {
			v, e, err := parseJAt(b, i)
			if err != nil {
				return nil, 0, err
			}
			a = append(a, v)
			i = skipWS(b, e)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return a, i + 1, nil
			}
			return nil, 0, errSyntax
		}
	}
	e, err := skipValue(b, i)
	if err != nil {
		return nil, 0, err
	}
	return jraw(b[i:e]), e, nil
}

func TestMinimize(t *testing.T) {
	raw := []byte("{\"type\":\"session\",\"id\":\"s\"}\r\n{\"a\":1,\"b\":{\"c\":[1,2,{\"bad\":true}]}}\n{\"x\":2}\n[[[[[[[[\"deep\"]]]]]]]]\n")
	bad := func(b []byte) bool { return bytes.Contains(b, []byte(`"bad"`)) }
	if got := minimize(raw, bad, 500); len(got) > 25 || !bad(got) || bytes.Count(got, []byte("\n")) != 1 {
		t.Errorf("minimize = %q", got)
	}
	deep := []byte(strings.Repeat("[", 1000) + "1" + strings.Repeat("]", 1000) + "\n")
	got := minimize(deep, func(b []byte) bool { return bytes.Count(b, []byte("[")) >= 10 }, 500)
	if n := bytes.Count(got, []byte("[")); n < 10 || n > 40 {
		t.Errorf("deep minimised to %d levels", n)
	}
}
