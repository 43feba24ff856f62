package eventlog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestBacklogReportsOnlyLongCatchUps: a catch-up shorter than the interval
// logs nothing; a longer one logs its progress each interval and once when
// it has caught up, with the lines it handled.
func TestBacklogReportsOnlyLongCatchUps(t *testing.T) {
	var out bytes.Buffer
	b := newBacklog(slog.New(slog.NewTextHandler(&out, nil)), "copying")
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

	b.update(100, 50, t0)
	b.update(50, 0, t0.Add(time.Second))
	if out.Len() != 0 {
		t.Fatalf("a 1 s catch-up logged:\n%s", out.String())
	}

	b.update(1000, 9000, t0.Add(10*time.Second))
	b.update(1000, 8000, t0.Add(12*time.Second))
	b.update(1000, 7000, t0.Add(16*time.Second))
	b.update(7000, 0, t0.Add(20*time.Second))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one progress line and one summary, got:\n%s", out.String())
	}
	if !strings.Contains(lines[0], `msg=copying lines=3000 pending=7000 elapsed=6s`) {
		t.Errorf("progress line: %s", lines[0])
	}
	if !strings.Contains(lines[1], `msg="copying: caught up" lines=10000 took=10s`) {
		t.Errorf("summary line: %s", lines[1])
	}
}
