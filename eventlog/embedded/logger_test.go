package embedded

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLoggerLevelsAndFatal(t *testing.T) {
	var buf bytes.Buffer
	l := newNATSLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Noticef("notice %d", 1)
	l.Warnf("warn")
	l.Errorf("error")
	l.Debugf("debug")
	if l.fatal() != nil {
		t.Fatal("fatal recorded before Fatalf")
	}
	l.Fatalf("Can't start JetStream: %v", "disk")
	l.Fatalf("second")
	out := buf.String()
	for _, want := range []string{"level=INFO msg=\"notice 1\"", "level=WARN msg=warn", "level=ERROR msg=error", "level=DEBUG msg=debug", "level=ERROR msg=\"Can't start JetStream: disk\""} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	select {
	case <-l.failed:
	default:
		t.Fatal("failed channel not closed")
	}
	if err := l.fatal(); err == nil || !strings.Contains(err.Error(), "Can't start JetStream: disk") {
		t.Errorf("fatal error = %v, want the first Fatalf", err)
	}
}
