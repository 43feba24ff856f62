package session

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"testing"
)

// The canonical text of testdata/pi-eval/c14n.mjs, written from pisyncd's
// side: what JSON.stringify writes of a value JSON.parse read, with every
// object's keys sorted by UTF-16 code units and no nesting limit. Two
// results agree exactly when their canonical texts are equal. It is written
// without encoding/json, whose scanner stops at 10,000 levels and replaces
// lone surrogates, so that neither hides a difference.

// cval is a parsed JSON value: a scalar's canonical text, or a container.
type cval struct {
	text string   // scalar: canonical text
	obj  bool     // object (keys) or array
	arr  bool     // array
	keys []string // object keys (WTF-8), in first-seen order
	kids []*cval  // members (object: parallel to keys)
}

// c14nRaw is the canonical text of one raw JSON value.
func c14nRaw(raw []byte) (string, error) {
	v, err := parseC(raw)
	if err != nil {
		return "", err
	}
	return writeC(v), nil
}

// parseC parses raw as JSON.parse does (duplicate keys: first position, last
// value) with an explicit stack.
func parseC(raw []byte) (*cval, error) {
	type frame struct {
		v   *cval
		pos map[string]int
	}
	var stack []frame
	var root *cval
	i := skipWS(raw, 0)
	attach := func(v *cval, key string) {
		if len(stack) == 0 {
			root = v
			return
		}
		f := &stack[len(stack)-1]
		if !f.v.obj {
			f.v.kids = append(f.v.kids, v)
			return
		}
		if k, ok := f.pos[key]; ok {
			f.v.kids[k] = v
			return
		}
		f.pos[key] = len(f.v.keys)
		f.v.keys = append(f.v.keys, key)
		f.v.kids = append(f.v.kids, v)
	}
	key := ""
	readKey := func() error {
		i = skipWS(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return errSyntax
		}
		e, _, err := skipString(raw, i)
		if err != nil {
			return err
		}
		key, _ = jsString(raw[i:e])
		i = skipWS(raw, e)
		if i >= len(raw) || raw[i] != ':' {
			return errSyntax
		}
		i = skipWS(raw, i+1)
		return nil
	}
	for {
		if i >= len(raw) {
			return nil, errSyntax
		}
		switch c := raw[i]; {
		case c == '{' || c == '[':
			v := &cval{obj: c == '{', arr: c == '['}
			attach(v, key)
			stack = append(stack, frame{v: v, pos: map[string]int{}})
			i = skipWS(raw, i+1)
			if i < len(raw) && (raw[i] == '}' || raw[i] == ']') {
				break // closed below
			}
			if v.obj {
				if err := readKey(); err != nil {
					return nil, err
				}
			}
			continue
		case c == '"':
			e, _, err := skipString(raw, i)
			if err != nil {
				return nil, err
			}
			s, _ := jsString(raw[i:e])
			attach(&cval{text: string(appendJSON(nil, s))}, key)
			i = e
		case c == 't' || c == 'f' || c == 'n':
			w := map[byte]string{'t': "true", 'f': "false", 'n': "null"}[c]
			e, err := skipWord(raw, i, w)
			if err != nil {
				return nil, err
			}
			attach(&cval{text: w}, key)
			i = e
		default:
			e, err := skipNumber(raw, i)
			if err != nil {
				return nil, err
			}
			f, _ := strconv.ParseFloat(string(raw[i:e]), 64)
			t := "null"
			if !math.IsInf(f, 0) {
				t = jsNumberString(f)
			}
			attach(&cval{text: t}, key)
			i = e
		}
		// after a value (or an empty container's opening): close or go on
		for {
			if len(stack) == 0 {
				if skipWS(raw, i) != len(raw) {
					return nil, errSyntax
				}
				return root, nil
			}
			i = skipWS(raw, i)
			if i >= len(raw) {
				return nil, errSyntax
			}
			top := stack[len(stack)-1].v
			if raw[i] == ',' {
				i = skipWS(raw, i+1)
				if top.obj {
					if err := readKey(); err != nil {
						return nil, err
					}
				}
				break
			}
			if (raw[i] == '}' && top.obj) || (raw[i] == ']' && top.arr) {
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			return nil, errSyntax
		}
	}
}

// writeC writes the canonical text of v without recursion.
func writeC(v *cval) string {
	if !v.obj && !v.arr {
		return v.text
	}
	type frame struct {
		v     *cval
		order []int
		i     int
	}
	var out []byte
	var stack []frame
	open := func(v *cval) {
		order := make([]int, len(v.kids))
		for k := range order {
			order[k] = k
		}
		if v.obj {
			out = append(out, '{')
			sort.Slice(order, func(a, b int) bool { return utf16Less(v.keys[order[a]], v.keys[order[b]]) })
		} else {
			out = append(out, '[')
		}
		stack = append(stack, frame{v: v, order: order})
	}
	open(v)
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.i == len(f.order) {
			if f.v.obj {
				out = append(out, '}')
			} else {
				out = append(out, ']')
			}
			stack = stack[:len(stack)-1]
			continue
		}
		k := f.order[f.i]
		if f.i > 0 {
			out = append(out, ',')
		}
		f.i++
		if f.v.obj {
			out = appendJSON(out, f.v.keys[k])
			out = append(out, ':')
		}
		kid := f.v.kids[k]
		if kid.obj || kid.arr {
			open(kid)
		} else {
			out = append(out, kid.text...)
		}
	}
	return string(out)
}

// c14nOf is the canonical text of a value built by the tests: maps with
// string keys, slices, strings (WTF-8), numbers, booleans, nil, IDs and raw
// JSON. A map member whose value is undefinedC is left out, as
// JSON.stringify leaves out undefined.
func c14nOf(v any) (string, error) {
	raw, err := rawOf(v)
	if err != nil {
		return "", err
	}
	return c14nRaw(raw)
}

// undefinedC marks a member that JSON.stringify leaves out.
type undefinedC struct{}

func rawOf(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return []byte("null"), nil
	case json.RawMessage:
		return x, nil
	case ID:
		return x.MarshalJSON()
	case string:
		return appendJSON(nil, x), nil
	case bool:
		return strconv.AppendBool(nil, x), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case []ID:
		out := make([]any, len(x))
		for k := range x {
			out[k] = x[k]
		}
		return rawOf(out)
	case []any:
		out := []byte{'['}
		for k, e := range x {
			if k > 0 {
				out = append(out, ',')
			}
			b, err := rawOf(e)
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
		return append(out, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := []byte{'{'}
		n := 0
		for _, k := range keys {
			if _, skip := x[k].(undefinedC); skip {
				continue
			}
			if n++; n > 1 {
				out = append(out, ',')
			}
			out = appendJSON(out, k)
			out = append(out, ':')
			b, err := rawOf(x[k])
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
		return append(out, '}'), nil
	case map[string]json.RawMessage:
		m := make(map[string]any, len(x))
		for k, v := range x {
			m[k] = v
		}
		return rawOf(m)
	}
	return nil, fmt.Errorf("c14n: unsupported %T", v)
}

func TestC14n(t *testing.T) {
	deep := func(n int) string {
		b := make([]byte, 0, 2*n+1)
		for k := 0; k < n; k++ {
			b = append(b, '[')
		}
		b = append(b, '1')
		for k := 0; k < n; k++ {
			b = append(b, ']')
		}
		return string(b)
	}
	for in, want := range map[string]string{
		`{"b":1,"a":[1e2,-0,1.50,"\u0061\ud800"],"b":2}`: `{"a":[100,0,1.5,"a\ud800"],"b":2}`,
		`{"\ud83d\ude00":1,"\uffff":2}`:                  "{\"😀\":1,\"\uffff\":2}",
		` 1e400 `:                                        `null`,
		`{"a":{},"b":[]}`:                                `{"a":{},"b":[]}`,
		`"\u00e9\/\u001f"`:                               `"é/\u001f"`,
		deep(50000):                                      deep(50000),
	} {
		got, err := c14nRaw([]byte(in))
		if err != nil || got != want {
			t.Errorf("c14n(%.60s) = %.60s, %v; want %.60s", in, got, err, want)
		}
	}
	for _, bad := range []string{`{"a":1,}`, `[1 2]`, `{"a"}`, `01`, `[`, `{"a":1}}`} {
		if _, err := c14nRaw([]byte(bad)); err == nil {
			t.Errorf("c14n(%s): no error", bad)
		}
	}
}
