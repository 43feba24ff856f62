package session

import (
	"bytes"
	"math/rand/v2"
	"strconv"
)

// The generator's JSON: objects keep member order and may hold duplicate
// keys, and jraw is written verbatim, so that a test can spell a value any
// way a program could (1e2, -0, escapes, invalid UTF-8, 100,000 levels).
type (
	jobj struct{ kv []jkv }
	jkv  struct {
		k string
		v any // *jobj, jarr, jraw, string, float64, int, bool, nil
	}
	jarr []any
	jraw string
)

func obj(kv ...any) *jobj {
	o := &jobj{}
	for i := 0; i+1 < len(kv); i += 2 {
		o.kv = append(o.kv, jkv{kv[i].(string), kv[i+1]})
	}
	return o
}

// get returns the value of the last member named k.
func (o *jobj) get(k string) (any, bool) {
	for i := len(o.kv) - 1; i >= 0; i-- {
		if o.kv[i].k == k {
			return o.kv[i].v, true
		}
	}
	return nil, false
}

// set replaces every member named k, or appends one.
func (o *jobj) set(k string, v any) {
	found := false
	for i := range o.kv {
		if o.kv[i].k == k {
			o.kv[i].v, found = v, true
		}
	}
	if !found {
		o.kv = append(o.kv, jkv{k, v})
	}
}

func (o *jobj) del(k string) {
	out := o.kv[:0]
	for _, m := range o.kv {
		if m.k != k {
			out = append(out, m)
		}
	}
	o.kv = out
}

func encodeJ(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case string:
		b.Write(appendJSON(nil, x))
	case jraw:
		b.WriteString(string(x))
	case jarr:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeJ(b, e)
		}
		b.WriteByte(']')
	case *jobj:
		b.WriteByte('{')
		for i, m := range x.kv {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(appendJSON(nil, m.k))
			b.WriteByte(':')
			encodeJ(b, m.v)
		}
		b.WriteByte('}')
	default:
		panic("encodeJ: " + strconv.Quote(string(rune(0))))
	}
}

func encodeJSONLine(v any) []byte {
	var b bytes.Buffer
	encodeJ(&b, v)
	return b.Bytes()
}

// slot is a place holding a value: a member of an object or an element of
// an array, found by walking a value.
type slot struct {
	get func() any
	set func(any)
}

// slotsOf lists every member and element under v, depth first.
func slotsOf(v any, out []slot) []slot {
	switch x := v.(type) {
	case *jobj:
		for i := range x.kv {
			m := &x.kv[i]
			out = append(out, slot{func() any { return m.v }, func(v any) { m.v = v }})
			out = slotsOf(m.v, out)
		}
	case jarr:
		for i := range x {
			i := i
			out = append(out, slot{func() any { return x[i] }, func(v any) { x[i] = v }})
			out = slotsOf(x[i], out)
		}
	}
	return out
}

// objectsOf lists every object under v (v included).
func objectsOf(v any, out []*jobj) []*jobj {
	switch x := v.(type) {
	case *jobj:
		out = append(out, x)
		for _, m := range x.kv {
			out = objectsOf(m.v, out)
		}
	case jarr:
		for _, e := range x {
			out = objectsOf(e, out)
		}
	}
	return out
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// numberSpelling spells n (or an unusual number) in one of JSON's ways.
func numberSpelling(r *rand.Rand, n int) jraw {
	s := strconv.Itoa(n)
	switch r.IntN(14) {
	case 0:
		return jraw(s + ".0")
	case 1:
		return jraw(s + "e0")
	case 2:
		return jraw(s + "E+0")
	case 3:
		return jraw(s + "00e-2")
	case 4:
		return "-0"
	case 5:
		return "0.0"
	case 6:
		return "1e400"
	case 7:
		return "-1e400"
	case 8:
		return "123456789012345678901234567890"
	case 9:
		return "5e-324"
	case 10:
		return "1e-7"
	case 11:
		return "9007199254740993"
	case 12:
		return "0.1e1"
	}
	return jraw(s)
}

// oddValue is a value of some other type than a field expects.
func oddValue(r *rand.Rand) any {
	switch r.IntN(22) {
	case 0:
		return nil
	case 1:
		return true
	case 2:
		return false
	case 3:
		return 0
	case 4:
		return jraw("-0")
	case 5:
		return ""
	case 6:
		return "x"
	case 7:
		return jarr{}
	case 8:
		return obj()
	case 9:
		return jarr{1, "a", nil}
	case 10:
		return obj("a", 1)
	case 11:
		return numberSpelling(r, r.IntN(100))
	case 12:
		return " "
	case 13:
		return jraw(`"\u0000"`)
	case 14:
		return jraw(`"\ud800"`)
	case 15:
		return "2025-01-01T00:00:00.000Z"
	case 16:
		return obj("type", "text", "text", "t")
	case 17:
		return jarr{obj("type", "text", "text", "t")}
	case 18:
		return obj("role", "user", "content", "hi")
	case 19:
		return "[object Object]"
	case 20:
		return jraw("1e2")
	}
	return deepValue(r, 1+r.IntN(6))
}

// deepValue nests a value depth levels deep, as arrays, objects or both.
func deepValue(r *rand.Rand, depth int) jraw {
	var open, close bytes.Buffer
	kind := r.IntN(3)
	for k := 0; k < depth; k++ {
		if kind == 0 || kind == 2 && k%2 == 0 {
			open.WriteByte('[')
			close.WriteByte(']')
		} else {
			open.WriteString(`{"a":`)
			close.WriteByte('}')
		}
	}
	inner := pick(r, "1", `"x"`, "null", "{}", "[]", `{"type":"text","text":"deep"}`)
	c := close.Bytes()
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return jraw(open.String() + inner + string(c))
}

// idSpelling spells id differently: escapes that decode to the same
// string, lone surrogates, invalid UTF-8, other types.
func idSpelling(r *rand.Rand, id string) any {
	switch r.IntN(12) {
	case 0: // the same string, every character escaped
		var b bytes.Buffer
		b.WriteByte('"')
		for _, c := range []byte(id) {
			b.WriteString(`\u00` + strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&15, 16))
		}
		b.WriteByte('"')
		return jraw(b.String())
	case 1: // one escaped character, upper-case hex
		if id == "" {
			return jraw(`""`)
		}
		return jraw(`"\u00` + strconv.FormatUint(uint64(id[0]), 16) + id[1:] + `"`)
	case 2:
		return jraw(`"` + id + `\ud800"`)
	case 3:
		return jraw(`"` + id + `\udc00"`)
	case 4:
		return jraw(`"` + id + "\xff\xfe" + `"`)
	case 5:
		return jraw(`"` + id + "\xed\xa0\x80" + `"`) // a surrogate in UTF-8: invalid, replaced
	case 6:
		return jraw(`"` + id + `\/"`)
	case 7:
		return 12345678
	case 8:
		return jraw("1e3")
	case 9:
		return ""
	case 10:
		return jarr{id}
	}
	return obj("id", id)
}
