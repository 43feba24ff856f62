package session

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
)

// hostileFile generates session file number n of the seed: a valid-looking
// pi session (grammar: every entry type of both rule sets, headers of
// versions 1-3) put through mutations (wrong types, number and id
// spellings, deep nesting, duplicate keys, huge values, odd lines and line
// endings). The same seed and n give the same bytes.
func hostileFile(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	g := &sessionGen{r: r}
	lines := g.session()
	muts := r.IntN(5) // 0: a file as a writer would make it
	for k := 0; k < muts; k++ {
		g.mutate(lines)
	}
	// Values with an own toString or valueOf member draw from a stream of
	// their own, so that every other file of a seed keeps its bytes.
	toPrimitiveValues(rand.New(rand.NewPCG(seed^toPrimitiveStream, uint64(n))), lines)
	raw := make([][]byte, len(lines))
	for i, l := range lines {
		raw[i] = encodeJSONLine(l)
	}
	if r.IntN(3) == 0 {
		raw = g.mutateLines(raw)
	}
	return g.join(raw)
}

type sessionGen struct {
	r       *rand.Rand
	version int // 1, 2 or 3
	ids     []string
	sid     string
	t       int64 // ms
}

func (g *sessionGen) hex8() string { return fmt.Sprintf("%08x", g.r.Uint32()) }

func (g *sessionGen) iso() string {
	g.t += int64(1 + g.r.IntN(5000))
	return isoString(float64(g.t))
}

// session is the header and entries, as objects.
func (g *sessionGen) session() []any {
	r := g.r
	g.version = pick(r, 3, 3, 3, 3, 2, 1)
	g.sid = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Uint64()&(1<<48-1))
	g.t = 1767225600000 + int64(r.IntN(1e9))
	h := obj("type", "session")
	switch g.version {
	case 3, 2:
		h.set("version", g.version)
	default:
		if r.IntN(2) == 0 {
			h.set("version", 1)
		}
	}
	h.set("id", g.sid)
	h.set("timestamp", g.iso())
	h.set("cwd", "/home/u/p")
	if r.IntN(8) == 0 {
		h.set("parentSession", "/home/u/.pi/agent/sessions/x/other.jsonl")
	}
	lines := []any{h}
	n := 1 + r.IntN(24)
	if r.IntN(10) == 0 {
		n = 26 + r.IntN(15) // more than 25 ids: the report's first and last leaves
	}
	for i := 0; i < n; i++ {
		lines = append(lines, g.entry(i))
	}
	return lines
}

func (g *sessionGen) entry(i int) *jobj {
	r := g.r
	id := g.hex8()
	e := obj("type", "message")
	if g.version >= 2 {
		e.set("id", id)
		var parent any
		switch {
		case i == 0 || r.IntN(25) == 0:
			parent = nil
		case r.IntN(5) == 0:
			parent = g.ids[r.IntN(len(g.ids))]
		default:
			parent = g.ids[len(g.ids)-1]
		}
		e.set("parentId", parent)
	}
	e.set("timestamp", g.iso())
	g.ids = append(g.ids, id)
	g.body(e, i)
	return e
}

// someID is an id of an entry so far (or a made-up one).
func (g *sessionGen) someID() string {
	if len(g.ids) == 0 || g.r.IntN(12) == 0 {
		return g.hex8()
	}
	return g.ids[g.r.IntN(len(g.ids))]
}

func (g *sessionGen) body(e *jobj, i int) {
	r := g.r
	switch k := r.IntN(30); {
	case k < 14:
		e.set("message", g.message(pick(r, "user", "user", "assistant", "assistant", "toolResult", "bashExecution",
			"custom", "branchSummary", "compactionSummary", "system", "hookMessage", "weird")))
	case k < 17:
		e.set("type", "compaction")
		e.set("summary", fmt.Sprintf("summary %d", i))
		if g.version == 1 && r.IntN(2) == 0 {
			e.set("firstKeptEntryIndex", r.IntN(i+1))
		} else if r.IntN(4) > 0 {
			e.set("firstKeptEntryId", g.someID())
		}
		e.set("tokensBefore", 1000+i)
		if r.IntN(3) == 0 {
			var tail jarr
			for k := r.IntN(4); k > 0; k-- {
				tail = append(tail, g.message(pick(r, "user", "assistant", "toolResult", "custom", "system")))
			}
			if r.IntN(6) == 0 {
				tail = append(tail, oddValue(r))
			}
			e.set("retainedTail", tail)
		}
		if r.IntN(3) == 0 {
			e.set("systemMessage", g.message("system"))
		}
		if r.IntN(4) == 0 {
			e.set("details", obj("readFiles", jarr{"a.go"}))
		}
	case k < 19:
		e.set("type", "branch_summary")
		e.set("fromId", g.someID())
		e.set("summary", pick[any](r, "tried something", "", nil))
	case k < 21:
		e.set("type", "custom_message")
		e.set("customType", "ext")
		e.set("content", pick[any](r, "note", jarr{obj("type", "text", "text", "note")}, nil))
		e.set("display", r.IntN(2) == 0)
		if r.IntN(2) == 0 {
			e.set("details", obj("n", i))
		}
	case k < 22:
		e.set("type", "custom")
		e.set("customType", "ext")
		e.set("data", obj("n", i))
	case k < 24:
		e.set("type", "context_edit")
		e.set("targetId", g.someID())
		switch r.IntN(4) {
		case 0:
			e.set("replacement", nil)
		case 1:
			e.set("replacement", obj("content", "edited"))
		case 2:
			e.set("replacement", obj("content", jarr{obj("type", "text", "text", "edited")}))
		}
	case k < 25:
		e.set("type", "usage")
		e.set("usage", obj("input", 10, "output", 20, "cacheRead", 0, "cacheWrite", 0, "totalTokens", 30))
	case k < 26:
		e.set("type", "label")
		e.set("targetId", g.someID())
		e.set("label", pick[any](r, "l1", "l2", "", nil))
	case k < 27:
		e.set("type", "session_info")
		e.set("name", pick[any](r, "name", "  spaced  ", "", nil))
	case k < 28:
		e.set("type", "model_change")
		e.set("provider", pick(r, "anthropic", "openai"))
		e.set("modelId", pick(r, "claude", "gpt-5"))
	case k < 29:
		e.set("type", "thinking_level_change")
		e.set("thinkingLevel", pick(r, "off", "low", "high"))
	default:
		e.set("type", pick(r, "unknown_type", "session", "Message"))
	}
}

func (g *sessionGen) message(role string) *jobj {
	r := g.r
	m := obj("role", role)
	text := pick(r, "hello", "list the files", "ok", "ünïcödé ✓", "")
	switch role {
	case "user":
		if r.IntN(2) == 0 {
			m.set("content", text)
		} else {
			m.set("content", jarr{obj("type", "text", "text", text), obj("type", "image", "data", "AAAA", "mimeType", "image/png")})
		}
	case "assistant":
		m.set("content", jarr{obj("type", "thinking", "thinking", "hmm"), obj("type", "text", "text", text),
			obj("type", "toolCall", "id", "call_1", "name", "bash", "arguments", obj("command", "ls"))})
		m.set("api", "anthropic-messages")
		m.set("provider", "anthropic")
		m.set("model", "claude")
		m.set("usage", obj("input", 10, "output", 5, "cacheRead", 0, "cacheWrite", 0, "totalTokens", 15,
			"cost", obj("input", 0.001, "output", 0.002, "cacheRead", 0, "cacheWrite", 0, "total", 0.003)))
		m.set("stopReason", pick(r, "stop", "toolUse", "error", "aborted"))
	case "toolResult":
		m.set("toolCallId", "call_1")
		m.set("toolName", "bash")
		m.set("content", jarr{obj("type", "text", "text", text)})
		m.set("isError", r.IntN(4) == 0)
	case "bashExecution":
		m.set("command", "ls")
		m.set("output", text)
		m.set("exitCode", r.IntN(2))
		m.set("cancelled", false)
		m.set("truncated", false)
		if r.IntN(3) == 0 {
			m.set("excludeFromContext", true)
		}
	case "custom", "hookMessage":
		m.set("customType", "ext")
		m.set("content", text)
		m.set("display", true)
	case "branchSummary":
		m.set("summary", text)
		m.set("fromId", g.someID())
	case "compactionSummary":
		m.set("summary", text)
		m.set("tokensBefore", 100)
	case "system":
		m.set("content", "You are pi.")
	default:
		m.set("content", text)
	}
	m.set("timestamp", int(g.t))
	return m
}

// mutate applies one value-level mutation to the lines.
func (g *sessionGen) mutate(lines []any) {
	r := g.r
	line := lines[r.IntN(len(lines))]
	if r.IntN(6) == 0 {
		line = lines[0] // the header is as exposed as any entry
	}
	slots := slotsOf(line, nil)
	objs := objectsOf(line, nil)
	switch r.IntN(11) {
	case 0, 1: // a wrong type anywhere
		if len(slots) > 0 {
			slots[r.IntN(len(slots))].set(oddValue(r))
		}
	case 2: // numbers in other spellings
		for _, s := range slots {
			if n, ok := s.get().(int); ok && r.IntN(2) == 0 {
				s.set(numberSpelling(r, n))
			}
		}
	case 3: // ids spelled otherwise
		o := line.(*jobj)
		for _, k := range []string{"id", "parentId", "targetId", "firstKeptEntryId", "fromId"} {
			if v, ok := o.get(k); ok && r.IntN(2) == 0 {
				s, _ := v.(string)
				o.set(k, idSpelling(r, s))
			}
		}
	case 4: // nesting far beyond 10,000 levels, or just a few
		if len(slots) > 0 {
			depth := pick(r, 20, 2500, 5000, 10001, 20000, 100000) // not near pi's stack limits (docs/RULES.md)
			slots[r.IntN(len(slots))].set(deepValue(r, depth))
		}
	case 5: // a duplicate key, before or after the original
		o := objs[r.IntN(len(objs))]
		if len(o.kv) > 0 {
			m := o.kv[r.IntN(len(o.kv))]
			dup := jkv{m.k, oddValue(r)}
			if r.IntN(2) == 0 {
				o.kv = append([]jkv{dup}, o.kv...)
			} else {
				o.kv = append(o.kv, dup)
			}
		}
	case 6: // a huge value
		if len(slots) > 0 {
			var v any = strings.Repeat(pick(r, "a", "é", "\n"), 20_000+r.IntN(180_000))
			if r.IntN(2) == 0 {
				a := make(jarr, 10_000+r.IntN(40_000))
				for k := range a {
					a[k] = k
				}
				v = a
			}
			// Not an id: pi-eval's worker needs minutes and gigabytes for
			// the sections of an entry whose id is 100k characters long.
			if o, ok := line.(*jobj); ok && r.IntN(2) == 0 {
				o.set(pick(r, "content", "details", "summary", "data"), v)
			} else if m, ok := line.(*jobj).get("message"); ok {
				if mo, ok := m.(*jobj); ok {
					mo.set("content", v)
				}
			}
		}
	case 7: // a field removed
		o := objs[r.IntN(len(objs))]
		if len(o.kv) > 0 {
			o.del(o.kv[r.IntN(len(o.kv))].k)
		}
	case 8: // an unexpected field, a name JavaScript treats specially
		o := objs[r.IntN(len(objs))]
		k := pick(r, "__proto__", "constructor", "toString", "retainedTail", "systemMessage", "replacement",
			"firstKeptEntryId", "content", "role", "type", "id", "parentId", "version")
		o.set(k, oddValue(r))
	case 9: // the header's version
		lines[0].(*jobj).set("version", pick[any](r, jraw("3.0"), jraw("3e0"), "3", 2.5, -1, nil, true, jarr{3},
			obj(), jraw("1e400"), 0, 4, 1, 2, jraw("-0"), jraw("NaN")))
	case 10: // a parent that makes branches, or a cycle
		o := line.(*jobj)
		if _, ok := o.get("parentId"); ok && len(g.ids) > 0 {
			// mostly an earlier entry (a branch); rarely any, which may
			// make a cycle, where pi never returns (bounded by the
			// harness, but each costs seconds)
			id := g.ids[r.IntN(len(g.ids))]
			if v, ok := o.get("id"); ok && r.IntN(8) > 0 {
				for k, x := range g.ids {
					if x == v {
						id = g.ids[r.IntN(k+1)]
						break
					}
				}
			}
			o.set("parentId", id)
		}
	}
}

// toPrimitiveStream tells toPrimitiveValues' random stream from the file's.
const toPrimitiveStream = 0x746f537472696e67 // "toString"

// toPrimitiveValues gives one file in six one to three values with an own
// toString or valueOf member (alone, inside arrays, inside an object; the
// key escaped or not) in the places pi converts to a string or a date:
// entry and header timestamps, the header version, summaries, a
// bashExecution's command, output, exit code and output path, text blocks,
// and custom content (which pi passes through). Never an id: pi-eval's
// harness makes ids property names of its answers, which throws for
// such an object where pi itself does not convert the id.
func toPrimitiveValues(r *rand.Rand, lines []any) {
	if r.IntN(6) != 0 {
		return
	}
	for k := 1 + r.IntN(3); k > 0; k-- {
		line, ok := lines[r.IntN(len(lines))].(*jobj)
		if !ok {
			continue
		}
		var places []*jobj // objects with a member to replace
		var keys []string
		for _, o := range objectsOf(line, nil) {
			for _, key := range []string{"timestamp", "version", "summary", "command", "output", "exitCode",
				"fullOutputPath", "text", "content"} {
				if _, ok := o.get(key); ok {
					places, keys = append(places, o), append(keys, key)
				}
			}
		}
		if len(places) == 0 {
			continue
		}
		i := r.IntN(len(places))
		o, key := places[i], keys[i]
		if key == "fullOutputPath" || key == "output" && r.IntN(2) == 0 {
			o.set("truncated", true) // fullOutputPath is read only then
		}
		if key == "command" && r.IntN(3) == 0 {
			o.set("fullOutputPath", toPrimitiveValue(r))
			o.set("truncated", true)
			continue
		}
		o.set(key, toPrimitiveValue(r))
	}
}

// toPrimitiveValue is a value whose conversion to a primitive throws in
// JavaScript (an own toString), or does not (an own valueOf only, or the
// member one object down).
func toPrimitiveValue(r *rand.Rand) any {
	member := pick(r, "toString", "toString", "toString", "valueOf", "to\\u0053tring", "valueOf\\u0000")
	v := jraw(`{"` + member + `":` + pick(r, "1", "null", `"s"`, "{}", "[]", "3", `"2026-01-01T00:00:00.000Z"`) + `}`)
	if r.IntN(4) == 0 {
		v = jraw(`{"valueOf":1,` + string(v[1:])) // both: toString decides
	}
	switch r.IntN(6) {
	case 0:
		return jarr{v}
	case 1:
		return jarr{nil, jarr{1, v}, "x"}
	case 2:
		return obj("a", v) // never converted: "[object Object]"
	}
	return v
}

// mutateLines changes lines as a whole: dropped, repeated, swapped,
// truncated, and blank, malformed or scalar lines inserted.
func (g *sessionGen) mutateLines(lines [][]byte) [][]byte {
	r := g.r
	for k := 1 + r.IntN(3); k > 0; k-- {
		i := r.IntN(len(lines))
		switch r.IntN(8) {
		case 0:
			if len(lines) > 1 {
				lines = append(lines[:i:i], lines[i+1:]...)
			}
		case 1:
			lines = insertLine(lines, r.IntN(len(lines)+1), lines[i])
		case 2:
			j := r.IntN(len(lines))
			lines[i], lines[j] = lines[j], lines[i]
		case 3:
			if len(lines[i]) > 1 {
				lines[i] = lines[i][:r.IntN(len(lines[i]))]
			}
		case 4:
			lines = insertLine(lines, r.IntN(len(lines)+1), []byte(pick(r, "", " ", "\t", "\u00a0", "\ufeff", "\r", "\u2028")))
		case 5:
			lines = insertLine(lines, r.IntN(len(lines)+1), []byte(pick(r, "{", `{"type":`, "garbage", "{}}", `{"a":1,}`)))
		case 6:
			lines = insertLine(lines, r.IntN(len(lines)+1), []byte(pick(r, "1", `"x"`, "[1]", "true", "null", "0", "[]", "{}", "-0", `""`, "[null]")))
		case 7:
			lines[i] = append(append([]byte(pick(r, " ", "\t", "\ufeff", "\u00a0")), lines[i]...), pick(r, " ", "\t ", "")...)
		}
	}
	return lines
}

func insertLine(lines [][]byte, at int, l []byte) [][]byte {
	out := append(lines[:at:at], append([]byte(nil), l...))
	return append(out, lines[at:]...)
}

// join ends the lines: \n, \r\n, \r or a mix, with or without a final
// line ending, sometimes after a BOM; rarely the whole file is empty.
func (g *sessionGen) join(lines [][]byte) []byte {
	r := g.r
	var b bytes.Buffer
	if r.IntN(40) == 0 {
		b.WriteString("\ufeff")
	}
	if r.IntN(200) == 0 {
		return pick(r, []byte{}, []byte("\n"), []byte(" \n\n"))
	}
	style := r.IntN(10)
	for i, l := range lines {
		b.Write(l)
		if i == len(lines)-1 && r.IntN(4) == 0 {
			break // no line ending at the end
		}
		switch {
		case style < 6:
			b.WriteString("\n")
		case style < 8:
			b.WriteString("\r\n")
		case style < 9:
			b.WriteString(pick(r, "\n", "\r\n", "\r", "\n\n", "\r\r\n"))
		default:
			b.WriteString("\r")
		}
	}
	return b.Bytes()
}
