package eventlog

import (
	"errors"
	"strings"
	"testing"
)

func TestSIDEncoding(t *testing.T) {
	for _, sid := range []string{
		"01a229ce-f2cb-75eb-a575-3225f42fb0a0", "a.b", "a..b", ".", "", "*", ">", "x y", "ü", "~x", "a_b-C9",
		strings.Repeat("z", 300),
	} {
		tok := EncodeSID(sid)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Errorf("EncodeSID(%q) = %q: not one subject token", sid, tok)
		}
		back, err := DecodeSID(tok)
		if err != nil || back != sid {
			t.Errorf("DecodeSID(EncodeSID(%q)) = %q, %v", sid, back, err)
		}
		node, got, err := ParseSubject(LocalSubject("n1", sid))
		if err != nil || node != "n1" || got != sid {
			t.Errorf("ParseSubject(LocalSubject(%q)) = %q %q %v", sid, node, got, err)
		}
	}
	if EncodeSID("0123-abcd") != "0123-abcd" {
		t.Error("plain ids must stay readable")
	}
	for _, bad := range []string{"pi.evt.n", "pi.evt.n.a.b", "x.y.z", "pi.evt..a", "pi.up.n.~!!"} {
		if _, _, err := ParseSubject(bad); err == nil {
			t.Errorf("ParseSubject(%q) accepted", bad)
		}
	}
}

func FuzzSIDEncoding(f *testing.F) {
	for _, s := range []string{"", "a.b", "01a229ce-f2cb-75eb-a575-3225f42fb0a0", "~", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sid string) {
		tok := EncodeSID(sid)
		if strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" {
			t.Fatalf("EncodeSID(%q) = %q", sid, tok)
		}
		back, err := DecodeSID(tok)
		if err != nil || back != sid {
			t.Fatalf("round trip %q -> %q -> %q, %v", sid, tok, back, err)
		}
	})
}

func TestParseChunk(t *testing.T) {
	for in, want := range map[string][2]int{"": {1, 1}, "1/1": {1, 1}, "3/7": {3, 7}} {
		i, n, err := ParseChunk(in)
		if err != nil || i != want[0] || n != want[1] {
			t.Errorf("ParseChunk(%q) = %d %d %v", in, i, n, err)
		}
	}
	for _, bad := range []string{"0/1", "2/1", "x", "1/", "/1", "-1/2"} {
		if _, _, err := ParseChunk(bad); err == nil {
			t.Errorf("ParseChunk(%q) accepted", bad)
		}
	}
}

func TestCheckSID(t *testing.T) {
	for _, c := range []struct {
		sid string
		ok  bool
	}{
		{"01a229ce-f2cb-75eb-a575-3225f42fb0a0", true},
		{strings.Repeat("a", MaxSIDToken), true},
		{strings.Repeat("a", MaxSIDToken+1), false},
		{strings.Repeat("a.", 95), true},  // 190 bytes: ~ + 254 characters of base64
		{strings.Repeat("a.", 96), false}, // 192 bytes: ~ + 256
		{strings.Repeat("z", 5000), false},
		{"", true},
	} {
		err := CheckSID(c.sid)
		if (err == nil) != c.ok {
			t.Errorf("CheckSID(%d bytes) = %v, want ok=%v", len(c.sid), err, c.ok)
		}
		if n := len(EncodeSID(c.sid)); (n <= MaxSIDToken) != c.ok {
			t.Errorf("%d bytes encode to %d: CheckSID disagrees with EncodeSID", len(c.sid), n)
		}
		if err != nil && !errors.Is(err, ErrSIDTooLong) {
			t.Errorf("CheckSID: %v is not ErrSIDTooLong", err)
		}
	}
}
