package testenv

import (
	"bytes"
	"encoding/json"
)

// HoldsNewerLine is the tests' own reading, independent of session/, of
// what only pi >= 0.86 writes: a context_edit or usage entry, a message
// with role system, a compaction with a systemMessage. The rule set auto
// must pick pi-1.6 exactly for a file holding such a line.
func HoldsNewerLine(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte{'\n'}) {
		var e struct {
			Type          string `json:"type"`
			SystemMessage any    `json:"systemMessage"`
			Message       *struct {
				Role any `json:"role"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		switch {
		case e.Type == "context_edit" || e.Type == "usage",
			e.Type == "message" && e.Message != nil && e.Message.Role == "system",
			e.Type == "compaction" && e.SystemMessage != nil && e.SystemMessage != false && e.SystemMessage != "" && e.SystemMessage != 0.0:
			return true
		}
	}
	return false
}
