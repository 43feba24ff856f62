package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/session"
)

// marshalPage is a page as it was built before appendPage: through
// ContextPage, truncate and json.Marshal, the reference appendPage must
// equal byte for byte.
func marshalPage(p int, ids []session.ID, refs []session.Ref, src Src) []byte {
	pg := ContextPage{Page: p, IDs: make([]json.RawMessage, len(ids)), Refs: make([]string, len(refs)), Src: src}
	for i, id := range ids {
		pg.IDs[i] = rawID(id)
	}
	for i, r := range refs {
		pg.Refs[i] = refString(r)
	}
	size := 64
	for _, r := range pg.Refs {
		size += len(r) + 3
	}
	for i, id := range pg.IDs {
		size += len(id) + 1
		if size > maxValue {
			pg.IDs, pg.Truncated = pg.IDs[:i], true
			break
		}
	}
	b, err := json.Marshal(pg)
	if err != nil {
		panic(err)
	}
	return b
}

// oddIDs are the ids of a session file whose entries have ids of every
// kind pi can write: strings that need escaping (for JSON, for HTML, for
// JavaScript's line separators, invalid UTF-8), numbers, objects, arrays,
// booleans.
func oddIDs(t testing.TB) []session.ID {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"session","version":3,"id":"odd","timestamp":"2026-11-29T23:08:16.463Z","cwd":"/x"}` + "\n")
	for _, id := range []string{`"plain-id_0"`, `"a<b>&c"`, `"q\"uote\\"`, `"\u2028\u2029"`, `"é世😀"`, `"\u0001\t"`, "\"\xff\xfe\"",
		`12`, `-0.5e300`, `{"o":[1,"<"]}`, `[1, 2]`, `true`, `null`, `""`, `"~!@#$%^*()=+[]{}|;:',./?"`} {
		fmt.Fprintf(&b, `{"type":"message","id":%s,"parentId":null,"timestamp":"2026-11-29T23:09:17.000Z","message":{"role":"user","content":"x","timestamp":1}}`+"\n", id)
	}
	f, err := session.Load([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var ids []session.ID
	for i := 0; i < f.Tree.Len(); i++ {
		ids = append(ids, f.Tree.Entry(i).ID)
	}
	return ids
}

// TestAppendPageEqualsMarshal: appendPage writes what json.Marshal of the
// truncated ContextPage writes, for ids of every kind, refs of both
// streams, no src and some, and a page cut to stay under maxValue.
func TestAppendPageEqualsMarshal(t *testing.T) {
	odd := oddIDs(t)
	if len(odd) < 10 {
		t.Fatalf("only %d odd ids", len(odd))
	}
	long := session.StringID(strings.Repeat("x", 300<<10))
	refs := []session.Ref{0, 1, 9, 10, 99, 1 << 40, makeRef(eventlog.AllStream, 7), makeRef(eventlog.AllStream, 1<<50)}
	cases := []struct {
		name string
		ids  []session.ID
		refs []session.Ref
		src  Src
	}{
		{"empty", nil, nil, nil},
		{"odd ids", odd, refs, Src{"PI_LOCAL": 3, "PI_ALL": 9}},
		{"ids alone", odd, nil, Src{}},
		{"refs alone", nil, refs, Src{"PI_ALL": 1}},
		{"cut", []session.ID{session.StringID("a"), long, long, long, session.StringID("b")}, refs, Src{"PI_LOCAL": 1}},
		{"cut at once", []session.ID{long, long, long, long}, refs, nil},
	}
	for p, c := range cases {
		got := appendPage(nil, p, c.ids, c.refs, c.src)
		want := marshalPage(p, c.ids, c.refs, c.src)
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %.300s\nwant %.300s", c.name, got, want)
		}
	}
	if !bytes.Contains(appendPage(nil, 0, cases[4].ids, refs, nil), []byte(`"truncated":true`)) {
		t.Error("the long page was not cut")
	}
}

// FuzzAppendPage: for any string ids and refs, appendPage equals the
// reference.
func FuzzAppendPage(f *testing.F) {
	f.Add("e0001", "a<b>", uint64(5), false)
	f.Add("\u2028", "\xff", uint64(1<<61), true)
	f.Add("", "\"\\", uint64(0), true)
	f.Fuzz(func(t *testing.T, a, b string, seq uint64, all bool) {
		ids := []session.ID{session.StringID(a), session.StringID(b), session.StringID(a + b)}
		r := session.Ref(seq &^ allBit)
		if all {
			r = makeRef(eventlog.AllStream, seq&^allBit)
		}
		refs := []session.Ref{r, 0}
		got := appendPage(nil, 1, ids, refs, Src{"PI_LOCAL": seq})
		want := marshalPage(1, ids, refs, Src{"PI_LOCAL": seq})
		if !bytes.Equal(got, want) {
			t.Fatalf("got %q\nwant %q", got, want)
		}
	})
}
