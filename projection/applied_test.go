package projection

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// The catalog entry's src in the bucket and as served must stay what the
// Src map gave: an object with sorted keys ({} when empty), read back.
func TestAppliedJSONAsTheMap(t *testing.T) {
	for _, m := range []Src{
		{},
		{"PI_LOCAL": 7},
		{"PI_LOCAL": 18446744073709551615, "PI_ALL": 3, "X\"<y>": 1},
	} {
		var a Applied
		for s, seq := range m {
			a.set(s, seq, &names{})
		}
		for s, seq := range m {
			if got := a.Get(s); got != seq {
				t.Errorf("Get(%q) = %d, want %d", s, got, seq)
			}
		}
		type withMap struct {
			Src Src `json:"src"`
		}
		type withSlice struct {
			Src Applied `json:"src"`
		}
		sameJSONAs(t, withMap{m}, withSlice{a}, func(x, y withSlice) bool { return slices.Equal(x.Src, y.Src) })
		if !maps.Equal(a.Src(), m) {
			t.Errorf("as a map %v, want %v", a.Src(), m)
		}
	}
}

func TestAppliedSetKeepsOrder(t *testing.T) {
	var a Applied
	a.set("PI_LOCAL", 5, &names{})
	a.set("PI_ALL", 9, &names{})
	a.set("PI_LOCAL", 6, &names{})
	want := Applied{{"PI_ALL", 9}, {"PI_LOCAL", 6}}
	if !slices.Equal(a, want) {
		t.Errorf("applied %v, want %v", a, want)
	}
	if a.Get("PI_OTHER") != 0 {
		t.Error("a stream never applied has a sequence")
	}
}

// sameJSONAs checks that sliceForm encodes as mapForm does, and that
// mapForm's encoding reads back as sliceForm (equal says when two are).
func sameJSONAs[T any](t *testing.T, mapForm any, sliceForm T, equal func(a, b T) bool) {
	t.Helper()
	want, err := json.Marshal(mapForm)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(sliceForm)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("encoded %s, the map gave %s", got, want)
	}
	var back T
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if !equal(back, sliceForm) {
		t.Errorf("read back %+v, want %+v", back, sliceForm)
	}
}
