package embedded

import (
	"bytes"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestRepeatsHeldBack: a message like one logged within the last minute
// (the same but for the digits of its numbers: a connection's port and id) is counted,
// not logged, and the first like it after the minute says how many there
// were. Before, a leaf connection the hub refused logged its error every
// second on both sides, for as long as it was refused.
func TestRepeatsHeldBack(t *testing.T) {
	var r repeats
	t0 := time.Unix(1000, 0)
	refused := func(port int) string {
		return fmt.Sprintf("127.0.0.1:%d - lid:%d - Leafnode Error 'Authorization Violation'", port, port%97)
	}
	if n, ok := r.note(refused(50001), t0); !ok || n != 0 {
		t.Fatalf("first: %d %v", n, ok)
	}
	for i := 1; i < 59; i++ {
		if _, ok := r.note(refused(50001+i), t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("attempt %d logged again", i)
		}
	}
	if n, ok := r.note("another message", t0.Add(time.Second)); !ok || n != 0 {
		t.Fatalf("another message held back: %d %v", n, ok)
	}
	// x509's validity error holds the current time, new each second.
	expired := func(lid int, at time.Time) string {
		return fmt.Sprintf("127.0.0.1:7422 - lid:%d - TLS leafnode handshake error: x509: certificate has expired or is not yet valid: current time %s is after 2026-12-01T10:00:00Z", lid, at.UTC().Format(time.RFC3339))
	}
	if _, ok := r.note(expired(7, t0), t0); !ok {
		t.Fatal("the first handshake error held back")
	}
	if _, ok := r.note(expired(8, t0.Add(time.Second)), t0.Add(time.Second)); ok {
		t.Fatal("the handshake error of the next attempt logged again")
	}
	// Names are not numbers: each workstation's connection is logged.
	for _, name := range []string{"ws1", "ws2", "ws-1", "ws-2"} {
		if _, ok := r.note(fmt.Sprintf("127.0.0.1:%d - lid:%d - Leafnode connection created  %s", 40000+len(name), len(name), name), t0.Add(time.Second)); !ok {
			t.Fatalf("%s's leaf connection held back as like another's", name)
		}
	}
	if n, ok := r.note(refused(60000), t0.Add(repeatWindow)); !ok || n != 58 {
		t.Fatalf("after the minute: %d %v, want 58 held back", n, ok)
	}

	// Bounded: past maxRepeats messages, those whose minute is over go.
	for i := 0; i < 2*maxRepeats; i++ {
		r.note(fmt.Sprintf("message %c%c", 'a'+i%26, 'a'+i/26), t0.Add(2*repeatWindow+time.Duration(i)*time.Second))
	}
	if len(r.seen) > maxRepeats {
		t.Errorf("%d messages remembered", len(r.seen))
	}

	// The logger: an attempt's number is never held back.
	var buf bytes.Buffer
	l := newNATSLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for i := 1; i <= 3; i++ {
		l.Errorf("Error trying to connect as leafnode to remote server (attempt %d)", i)
		l.Errorf("%s - lid:%d - Leafnode Error 'Authorization Violation'", "127.0.0.1:5000"+strconv.Itoa(i), i)
	}
	if got := strings.Count(buf.String(), "(attempt "); got != 3 {
		t.Errorf("%d attempts logged, want 3:\n%s", got, buf.String())
	}
	if got := strings.Count(buf.String(), "Authorization Violation"); got != 1 {
		t.Errorf("the refusal logged %d times, want 1:\n%s", got, buf.String())
	}
}
