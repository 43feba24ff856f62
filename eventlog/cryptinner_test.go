package eventlog

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeInner: decodeInner accepts what json.Unmarshal accepts and
// decodes it alike, whether its fast path reads the input or not.
func FuzzDecodeInner(f *testing.F) {
	for _, in := range []inner{
		{SID: "0199-a", ID: "e1", Parent: "e0", Type: "message", File: "2026_x.jsonl", Off: 1234, Sha: "ab"},
		{SID: "s", Op: "erase"},
		{SID: "s<&>", ID: "é\u2028", Off: -1, Sha: "x\"y\\"},
		{},
	} {
		b, _ := json.Marshal(in)
		f.Add(b)
	}
	f.Add([]byte(`{"sid":"a","SID":"b","sha":""}`))
	f.Add([]byte(`{"sid":"a", "sha":""}`))
	f.Add([]byte(`{"sha":"","sid":"a"}`))
	f.Add([]byte(`{"sid":"a","off":01,"sha":""}`))
	f.Add([]byte("{\"sid\":\"\xff\",\"sha\":\"\"}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got inner
		werr := json.Unmarshal(b, &want)
		gerr := decodeInner(b, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: json.Unmarshal says %v, decodeInner %v", b, werr, gerr)
		}
		if werr == nil && got != want {
			t.Fatalf("%q: json.Unmarshal gives %+v, decodeInner %+v", b, want, got)
		}
	})
}

// TestDecodeInnerFast: what json.Marshal writes is read by the fast path.
func TestDecodeInnerFast(t *testing.T) {
	for _, in := range []inner{
		{SID: "0199-a", ID: "e1", Parent: "e0", Type: "message", File: "2026_x.jsonl", Off: 1234, Sha: "ab"},
		{SID: "s", Op: "erase"},
		{SID: "s", Type: "session", Sha: "cd", Off: -5},
	} {
		b, _ := json.Marshal(in)
		var got inner
		if !decodeInnerFast(b, &got) || got != in {
			t.Errorf("%s: fast path gives %+v", b, got)
		}
	}
}

func BenchmarkDecodeInner(b *testing.B) {
	raw, _ := json.Marshal(inner{SID: "0199bebe-0000-7000-8000-000000000002", ID: "a1b2c3d4", Parent: "f0e1d2c3", Type: "message", File: "2026-11-30T00-00-00-000Z_0199bebe-0000-7000-8000-000000000002.jsonl", Off: 123456, Sha: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
	for _, c := range []struct {
		name string
		fn   func([]byte, *inner) error
	}{{"decodeInner", decodeInner}, {"json.Unmarshal", func(b []byte, in *inner) error { return json.Unmarshal(b, in) }}} {
		b.Run(c.name, func(b *testing.B) {
			var in inner
			for b.Loop() {
				if err := c.fn(raw, &in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
