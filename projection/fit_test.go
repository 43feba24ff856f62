package projection

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFitCutsLongStrings: a catalog entry with a name and a model id of a
// MiB each fits a value once fit cuts them; numbers, short strings and
// the shape stay as they were.
func TestFitCutsLongStrings(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // a MiB, in two-byte runes
	c := CatalogEntry{SessionID: "s", Name: long, Entries: 1234567890, Model: json.RawMessage(`{"provider":"p","modelId":"` + long + `"}`)}
	data, _ := json.Marshal(c)
	if len(data) <= maxValue {
		t.Fatalf("the entry is %d bytes: not over the limit", len(data))
	}
	out := fit(data)
	if len(out) > maxValue {
		t.Fatalf("fit left %d bytes", len(out))
	}
	var got CatalogEntry
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.SessionID != "s" || got.Entries != 1234567890 || !strings.HasSuffix(got.Name, "é…") || len(got.Name) > maxFieldShown+len("…") {
		t.Errorf("fit made %+.200v", got)
	}
	var m struct{ Provider, ModelID string }
	if err := json.Unmarshal(got.Model, &m); err != nil || m.Provider != "p" || len(m.ModelID) > maxFieldShown+len("…") {
		t.Errorf("model %.100s: %v", got.Model, err)
	}
	if string(fit([]byte("not json"))) != "not json" {
		t.Error("fit changed what it could not read")
	}
}
