package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestWantsJSON(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--json"}, true},
		{[]string{"ID", "-json"}, true},
		{[]string{"--json=true"}, true},
		{[]string{"--json=false"}, false},
		{[]string{"--json", "--json=0"}, false},
		{[]string{"--jsonx"}, false},
		{[]string{"json"}, false},         // a positional argument
		{[]string{"--", "--json"}, false}, // after the flags end
		{[]string{"--json=maybe"}, false}, // the flag package refuses it; the error is text
		{[]string{"--limit", "3", "--json"}, true},
	} {
		if got := WantsJSON(c.args); got != c.want {
			t.Errorf("WantsJSON(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestWriteError(t *testing.T) {
	var b bytes.Buffer
	if code := WriteError(&b, "pisyncd", errors.New("status: no daemon"), false); code != 1 || b.String() != "pisyncd: status: no daemon\n" {
		t.Errorf("text: exit %d, %q", code, b.String())
	}
	for _, c := range []struct {
		err  error
		want errorJSON
	}{
		{errors.New("status: no daemon\nstart it"), errorJSON{Error: "status: no daemon\nstart it", Exit: 1}},
		{&UsageError{Msg: "ls: bad flag", Usage: "pisyncd ls [--json]"}, errorJSON{Error: "ls: bad flag", Usage: "pisyncd ls [--json]", Exit: 2}},
	} {
		b.Reset()
		code := WriteError(&b, "pisyncd", c.err, true)
		var got errorJSON
		if err := json.Unmarshal(b.Bytes(), &got); err != nil || got != c.want || code != c.want.Exit || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
			t.Errorf("%v: exit %d, %q (%v), want %+v on one line", c.err, code, b.String(), err, c.want)
		}
	}
}
