package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestWriteContextEqualsMarshal: the streamed context is byte for byte
// json.Marshal of the built one, for every corpus file under both rule
// sets, at the leaf and with no leaf; where building fails, streaming
// fails too. Bodies are asked once each, in the order of Index.Refs.
func TestWriteContextEqualsMarshal(t *testing.T) {
	compared := 0
	eachLoadedCorpusFile(t, func(c corpusCase, r RuleSet, f *File) {
		for _, at := range []func() (*Index, error){f.Tree.Index, func() (*Index, error) { return f.Tree.IndexAt(nil) }} {
			ix, ierr := at()
			var want []byte
			var cerr error
			if ierr == nil {
				var ctx *Context
				if ctx, cerr = f.Tree.render(ix, f); cerr == nil {
					want, _ = json.Marshal(ctx)
				}
			}
			if ierr != nil {
				continue
			}
			src := &orderedSource{t: t, f: f, refs: ix.Refs}
			var got bytes.Buffer
			err := ix.WriteContext(&got, src)
			switch {
			case (err == nil) != (cerr == nil):
				t.Errorf("%s (%v): stream error %v, build error %v", c.name, r, err, cerr)
			case err == nil && !bytes.Equal(got.Bytes(), want):
				t.Errorf("%s (%v): streamed\n%.400s\nwant\n%.400s", c.name, r, got.Bytes(), want)
			case err == nil && src.k != len(ix.Refs):
				t.Errorf("%s (%v): %d bodies asked, index names %d", c.name, r, src.k, len(ix.Refs))
			}
			compared++
		}
	})
	if compared < 100 {
		t.Errorf("only %d contexts compared", compared)
	}
}

// eachLoadedCorpusFile calls fn with every corpus file (the seed's and
// pi 1.6's) that loads, under each of the two rule sets.
func eachLoadedCorpusFile(t *testing.T, fn func(c corpusCase, r RuleSet, f *File)) {
	cases := append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...)
	for _, r := range []RuleSet{RulesSeed, RulesPi16} {
		for _, c := range cases {
			if f, err := LoadRules(c.raw, r); err == nil {
				fn(c, r, f)
			}
		}
	}
}

// TestWriteContextStopsOnBodyError: a body the source cannot give stops
// the context with the source's error.
func TestWriteContextStopsOnBodyError(t *testing.T) {
	f, err := Load([]byte(`{"type":"session","id":"s","version":3,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := f.Tree.Index()
	if err != nil {
		t.Fatal(err)
	}
	gone := errors.New("gone")
	err = ix.WriteContext(&bytes.Buffer{}, failing{gone})
	if !errors.Is(err, gone) {
		t.Fatalf("got %v", err)
	}
}

type failing struct{ err error }

func (f failing) Body(Ref) ([]byte, error) { return nil, f.err }

// orderedSource serves a File's bodies and checks they are asked in the
// order the index names them.
type orderedSource struct {
	t    *testing.T
	f    *File
	refs []Ref
	k    int
}

func (s *orderedSource) Body(ref Ref) ([]byte, error) {
	if s.k >= len(s.refs) || s.refs[s.k] != ref {
		s.t.Errorf("body %d asked at position %d, index names %v", ref, s.k, s.refs[min(s.k, len(s.refs)-1)])
	}
	s.k++
	return s.f.Body(ref)
}

// TestReadSpansEqualsLoad: a file read line by line, its bodies read back
// from it, gives the context Load gives, byte for byte, for every corpus
// file under both rule sets, and for a file with lines longer than the
// read buffer, invalid UTF-8 and no final '\n'; Load's errors are its
// errors.
func TestReadSpansEqualsLoad(t *testing.T) {
	cases := append(loadCorpus(t), loadCorpusDir(t, conformance16Dir(t))...)
	long := `{"type":"session","id":"s","version":3,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}` + "\n\n" +
		`{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"` + strings.Repeat("x", 600<<10) + "\xff\"}}\r\n" +
		"not json\n" +
		strings.Repeat("\x00", 700<<10) + "\n" + "  \t" + strings.Repeat("[1,", 300<<10) + "\n" + strings.Repeat(" ", 300<<10) + `{"type":"label","id":"l","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z","targetId":"a","label":"x"}` + "\n" +
		`{"type":"model_change","id":"m","parentId":"l","timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"` + strings.Repeat("y", 300<<10) + `"}` + "\n" +
		`{"type":"message","id":"b","parentId":"m","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[],"provider":"p","model":"q"}}`
	cases = append(cases, corpusCase{name: "long-lines", raw: []byte(long)})
	for _, r := range []RuleSet{RulesSeed, RulesPi16} {
		for _, c := range cases {
			want, werr := loadContextJSON(c.raw, r)
			s, err := ReadSpans(bytes.NewReader(c.raw), int64(len(c.raw)), r)
			var got bytes.Buffer
			if err == nil {
				var ix *Index
				if ix, err = s.Tree.Index(); err == nil {
					err = ix.WriteContext(&got, s)
				}
			}
			switch {
			case c.name == "long-lines" && (werr != nil || got.Len() < 600<<10):
				t.Errorf("long-lines (%v): load error %v, context %d bytes", r, werr, got.Len())
			case (err == nil) != (werr == nil):
				t.Errorf("%s (%v): spans error %v, load error %v", c.name, r, err, werr)
			case err == nil && !bytes.Equal(got.Bytes(), want):
				t.Errorf("%s (%v): spans\n%.300s\nload\n%.300s", c.name, r, got.Bytes(), want)
			}
		}
	}
}

// TestReadSpansSkipsLongNonObjects: a line that is no object (pi skips it)
// is read past without being held, however long: a file of 2 GiB of NULs
// cost 7.3 GB to be found no session (a probe, 2026-12-06).
func TestReadSpansSkipsLongNonObjects(t *testing.T) {
	hdr := `{"type":"session","id":"s","version":3,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}` + "\n"
	entry := `{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}` + "\n"
	const junk = 64 << 20
	raw := make([]byte, 0, len(hdr)+junk+1+len(entry))
	raw = append(raw, hdr...)
	raw = append(raw, make([]byte, junk)...) // NULs
	raw = append(raw, '\n')
	raw = append(raw, entry...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s, err := ReadSpans(bytes.NewReader(raw), int64(len(raw)), RulesSeed)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tree.Len() != 1 {
		t.Errorf("%d entries, want the message", s.Tree.Len())
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("reading past a %d MiB line of NULs allocated %d MiB", junk>>20, alloc>>20)
	}
}

// loadContextJSON is json.Marshal of LoadRules(raw, r)'s context.
func loadContextJSON(raw []byte, r RuleSet) ([]byte, error) {
	f, err := LoadRules(raw, r)
	if err != nil {
		return nil, err
	}
	c, err := f.Context()
	if err != nil {
		return nil, err
	}
	return json.Marshal(c)
}

// TestCompactHTMLEqualsEncodingJSON: compactHTML writes what json.Compact
// then json.HTMLEscape write (numbers aside: TestCompactHTMLNumbers), on values with every kind of whitespace,
// escape and HTML-sensitive character, and goes on past the 10,000 levels
// where json.Compact stops.
func TestCompactHTMLEqualsEncodingJSON(t *testing.T) {
	values := []string{
		`{"a" : [1, 2 ,{ "b":"<x> & y"}],` + "\n\t" + `"c":"\u2028 \" \\ \/ ` + "\u2028\u2029" + ` <>&"}`,
		` "plain" `, `[ ]`, `{ }`, `-15000000000`, `0.25`, `true`, `null`,
		`"a\\"`, `"\\\"<"`, `["\"", " ", "\\", "` + "\xe2\x80" + `"]`,
		"{\"k\":\"\xff\xfe bytes\", \"e\":\"\u00e9\u4e16\U0001F600\"}",
	}
	// Long plain runs, with one character that needs care at every
	// position of the eight bytes compactHTML passes over at once.
	for _, c := range []string{`<`, `>`, `&`, "\u2028", "\u2029", "\u00e9", `\"`, `\\`, `\n`, `=`, `?`, `$`, "\xe2", "\xe2\x80", "\xff"} {
		for p := range 24 {
			values = append(values, `"`+strings.Repeat("a", p)+c+strings.Repeat("b", 20)+`"`)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		values = append(values, randomJSON(r, 4))
	}
	for _, v := range values {
		var want, esc, got bytes.Buffer
		if err := json.Compact(&want, []byte(v)); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		json.HTMLEscape(&esc, want.Bytes())
		compactHTML(&got, []byte(v))
		// The one number randomJSON writes otherwise than JavaScript.
		if got.String() != strings.ReplaceAll(esc.String(), "-0.5e3", "-500") {
			t.Fatalf("%q:\n got %q\nwant %q", v, got.String(), esc.String())
		}
	}
	deep := strings.Repeat("[ ", 20000) + strings.Repeat("] ", 20000)
	var got bytes.Buffer
	compactHTML(&got, []byte(deep))
	if want := strings.Repeat("[", 20000) + strings.Repeat("]", 20000); got.String() != want {
		t.Fatalf("a value 20,000 levels deep: got %d bytes, want %d", got.Len(), len(want))
	}
}

// TestCompactHTMLNumbers: numbers come out as pi writes them back
// (JSON.stringify of what JSON.parse read), a number past the largest
// double as null: pi's context never holds 1e400, and a Go reader refused
// the whole context for it.
func TestCompactHTMLNumbers(t *testing.T) {
	// Every form also checked against the parse (jsPlain is a shortcut):
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var tok string
		switch r.IntN(3) {
		case 0:
			tok = strconv.FormatFloat(r.NormFloat64()*math.Pow(10, float64(r.IntN(30)-15)), 'f', -1, 64)
		case 1:
			tok = strconv.FormatFloat(r.Float64(), 'f', r.IntN(20), 64)
		default:
			tok = strconv.FormatInt(r.Int64N(1<<62)>>r.IntN(62), 10)
		}
		f, _ := strconv.ParseFloat(tok, 64)
		if want := jsNumberString(f); jsPlain([]byte(tok)) && want != tok {
			t.Fatalf("jsPlain(%s), but JavaScript writes %s", tok, want)
		}
	}
	for in, want := range map[string]string{
		`0`: `0`, `-0`: `0`, `7`: `7`, `-12`: `-12`, `1.0`: `1`, `1E+2`: `100`, `1e2`: `100`, `0.0000001`: `1e-7`,
		`0.000001`: `0.000001`, `1.5e-7`: `1.5e-7`, `123456789012345`: `123456789012345`,
		`1234567890123456789`: `1234567890123456800`, `12345678901234567890123`: `1.2345678901234568e+22`,
		`1e21`: `1e+21`, `1e400`: `null`, `-1e400`: `null`, `1e-400`: `0`, `5e-324`: `5e-324`, `-0.0`: `0`, `0.1`: `0.1`,
		`{"a":1.50,"b":[1e400, -0, "1.0"]}`: `{"a":1.5,"b":[null,0,"1.0"]}`,
		`0.003`:                             `0.003`, `-0.5`: `-0.5`, `123.456`: `123.456`, `0.0000012`: `0.0000012`, `0.00000012`: `1.2e-7`,
		`1.23456789012345`: `1.23456789012345`, `1.234567890123456789`: `1.2345678901234567`, `0.1000000000000000055511151231257827`: `0.1`,
	} {
		var got bytes.Buffer
		compactHTML(&got, []byte(in))
		if got.String() != want {
			t.Errorf("%s: got %s, want %s", in, got.String(), want)
		}
	}
}

// randomJSON is a random JSON value with random whitespace between its
// tokens and strings drawn from characters that need care.
func randomJSON(r *rand.Rand, depth int) string {
	ws := func() string { return []string{"", " ", "\n", "\t", "\r\n  "}[r.IntN(5)] }
	str := func() string {
		var b strings.Builder
		b.WriteByte('"')
		for range r.IntN(8) {
			b.WriteString([]string{"a", "<", ">", "&", `\"`, `\\`, `\n`, `\u0041`, "\u2028", "\u2029", "é", " ", "\u2027"}[r.IntN(13)])
		}
		b.WriteByte('"')
		return b.String()
	}
	if depth == 0 {
		return []string{str(), "1", "-0.5e3", "true", "null"}[r.IntN(5)]
	}
	var b strings.Builder
	switch r.IntN(3) {
	case 0:
		b.WriteString("[" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString(ws() + "," + ws())
			}
			b.WriteString(randomJSON(r, depth-1))
		}
		b.WriteString(ws() + "]")
	case 1:
		b.WriteString("{" + ws())
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			b.WriteString(str() + ws() + ":" + ws() + randomJSON(r, depth-1))
		}
		b.WriteString(ws() + "}")
	default:
		return ws() + str() + ws()
	}
	return b.String()
}

// TestWriteContextOnTwo: a whole file's context rendered on two goroutines
// (chunks of one entry and more) is the sequential one, byte for byte, for
// every corpus file under both rule sets; where the sequential one fails,
// it fails with the same error.
func TestWriteContextOnTwo(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one P: WriteContext renders on one goroutine")
	}
	compared := 0
	eachLoadedCorpusFile(t, func(c corpusCase, r RuleSet, f *File) {
		ix, err := f.Tree.Index()
		if err != nil {
			return
		}
		var want bytes.Buffer
		werr := ix.WriteContext(&want, struct{ BodySource }{f}) // not a *File: one goroutine
		for _, chunk := range []int{1, 300, 2000} {
			if ix.renderChunks(f, chunk) == nil {
				continue
			}
			var got bytes.Buffer
			err := ix.writeContext(&got, f, chunk)
			switch {
			case (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error():
				t.Errorf("%s (%v, chunks of %d bytes): error %v, sequential %v", c.name, r, chunk, err, werr)
			case err == nil && !bytes.Equal(got.Bytes(), want.Bytes()):
				t.Errorf("%s (%v, chunks of %d bytes):\n%.400s\nsequential\n%.400s", c.name, r, chunk, got.Bytes(), want.Bytes())
			}
			compared++
		}
	})
	if compared < 100 {
		t.Errorf("only %d contexts compared", compared)
	}
}

// TestWriteOnTwoStopsAtFirstError: a body missing on the helper's side (an
// odd chunk) or on the writer's (an even one) stops the context with that
// error, and nothing of the chunks after it is written.
func TestWriteOnTwoStopsAtFirstError(t *testing.T) {
	lines := []string{`{"type":"session","id":"s","version":3,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}`}
	parent := "null"
	for i := range 6 {
		lines = append(lines, fmt.Sprintf(`{"type":"message","id":"e%d","parentId":%s,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"m%d"}}`, i, parent, i))
		parent = fmt.Sprintf(`"e%d"`, i)
	}
	f, err := Load([]byte(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := f.Tree.Index()
	if err != nil {
		t.Fatal(err)
	}
	bounds := ix.renderChunks(f, 1) // one entry a chunk
	if len(bounds)-1 != 6 {
		t.Fatalf("chunks bounded by %v, want six", bounds)
	}
	for _, at := range []int{1, 2, 5} {
		gone := errors.New("gone")
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		err := ix.writeMessagesOnTwo(w, failAt{f, ix.Refs[at], gone}, bounds)
		w.Flush()
		if !errors.Is(err, gone) {
			t.Errorf("body of entry %d missing: got %v", at, err)
		}
		for i := range 6 {
			if wrote := strings.Contains(got.String(), fmt.Sprintf(`"m%d"`, i)); wrote != (i < at) {
				t.Errorf("body of entry %d missing: message %d written %v, in %s", at, i, wrote, got.String())
			}
		}
	}
}

// failAt serves a File's bodies but ref's, and is safe for concurrent use.
type failAt struct {
	f   *File
	ref Ref
	err error
}

func (s failAt) Body(ref Ref) ([]byte, error) {
	if ref == s.ref {
		return nil, s.err
	}
	return s.f.Body(ref)
}
