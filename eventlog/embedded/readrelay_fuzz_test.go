package embedded

import (
	"encoding/json"
	"testing"
)

// FuzzRelayedRequest: whatever a reader sends, the request the relay
// makes of JetStream is a direct get of known fields, with the batch and
// its bytes within the relay's bounds.
func FuzzRelayedRequest(f *testing.F) {
	for _, s := range []string{`{"seq":1}`, `{"seq":1,"batch":100000,"next_by_subj":"pi.evt.>"}`,
		`{"last_by_subj":"pi.evt.>"}`, `{"batch":-5}`, `{"max_bytes":1e12,"batch":2}`, `{"seq":1,"x":2}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, batch, ok := relayedRequest(data)
		if !ok {
			return
		}
		var req getRequest
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("relayed %q: %v", body, err)
		}
		if req.Batch < 0 || req.Batch > relayBatch || req.MaxBytes < 0 || req.MaxBytes > relayMaxBytes || (batch != (req.Batch > 0)) || (!batch && req.MaxBytes != 0) {
			t.Fatalf("%q relayed as %q (batch %v)", data, body, batch)
		}
	})
}
