package watch

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestMalformedWarnedOnceAMinute: a file that gets a malformed line at
// every read is warned of once a minute, with the count since, not at
// every read.
func TestMalformedWarnedOnceAMinute(t *testing.T) {
	var log bytes.Buffer
	w := &worker{t: &Tailer{logger: slog.New(slog.NewTextHandler(&log, nil))}}
	at := time.Unix(1_000_000, 0)
	for i := range 100 { // ten a second for ten seconds
		w.malformedWarn("--p--/x.jsonl", 1, at.Add(time.Duration(i)*100*time.Millisecond))
	}
	w.malformedWarn("--p--/y.jsonl", 3, at)
	w.malformedWarn("--p--/x.jsonl", 1, at.Add(61*time.Second))
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "count=1") || !strings.Contains(lines[1], "y.jsonl count=3") || !strings.Contains(lines[2], "x.jsonl count=100") {
		t.Fatalf("warnings:\n%s", log.String())
	}
}
