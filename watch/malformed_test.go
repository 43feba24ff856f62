package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"
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

// TestUnreadableFileHint: a file this user may not read is warned of with
// the mend (chmod u+r), where only the cause was named; other failures
// get no such hint.
func TestUnreadableFileHint(t *testing.T) {
	var log bytes.Buffer
	w := &worker{t: &Tailer{logger: slog.New(slog.NewTextHandler(&log, nil))}, retry: map[string]retryState{}}
	denied := &fs.PathError{Op: "open", Path: "/s/--p--/a.jsonl", Err: syscall.EACCES}
	w.failed(context.Background(), "/s/--p--/a.jsonl", fmt.Errorf("read: %w", denied))
	w.failed(context.Background(), "/s/--p--/b.jsonl", errors.New("read: input/output error"))
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "chmod u+r /s/--p--/a.jsonl") || strings.Contains(lines[1], "hint") {
		t.Fatalf("warnings:\n%s", log.String())
	}
}
