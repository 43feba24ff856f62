package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsLogger adapts slog to server.Logger. Its Fatalf does not exit: the
// server calls Fatalf for errors it cannot start with (e.g. "Can't start
// JetStream") and then carries on half-started, so the error is recorded
// and the owner decides what to do.
type natsLogger struct {
	log     *slog.Logger
	repeats repeats

	once   sync.Once
	err    error
	failed chan struct{} // closed on the first Fatalf
}

var _ server.Logger = (*natsLogger)(nil)

func newNATSLogger(l *slog.Logger) *natsLogger {
	return &natsLogger{log: l, failed: make(chan struct{})}
}

func (l *natsLogger) emit(level slog.Level, format string, v []any) string {
	msg := fmt.Sprintf(format, v...)
	l.log.Log(context.Background(), level, msg)
	return msg
}

// emitOnce logs as emit does, but a message like one logged within the
// last repeatWindow only counts, and the first like it after the window
// says how many there were: a leaf connection whose credentials the hub
// refuses is tried again every second, and each try logs on both sides.
func (l *natsLogger) emitOnce(level slog.Level, format string, v []any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "(attempt ") {
		// A failed connect or reconnect to the hub: the server logs only
		// some of those as errors already (connectErrorReports), each with
		// its number.
		l.log.Log(context.Background(), level, msg)
		return
	}
	n, ok := l.repeats.note(msg, time.Now())
	if !ok {
		return
	}
	if n > 0 {
		l.log.Log(context.Background(), level, msg, "like_it_in_the_last_minute", n)
		return
	}
	l.log.Log(context.Background(), level, msg)
}

func (l *natsLogger) Noticef(format string, v ...any) { l.emitOnce(slog.LevelInfo, format, v) }
func (l *natsLogger) Warnf(format string, v ...any)   { l.emitOnce(slog.LevelWarn, format, v) }
func (l *natsLogger) Errorf(format string, v ...any)  { l.emitOnce(slog.LevelError, format, v) }
func (l *natsLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }

// Tracef is only called when the server was given the trace flag
// (Config.Trace); slog has no trace level, so it logs at debug.
func (l *natsLogger) Tracef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

// Fatalf always logs: it is said once per server.
func (l *natsLogger) Fatalf(format string, v ...any) {
	msg := l.emit(slog.LevelError, format, v)
	l.once.Do(func() {
		fe := &fatalError{msg: msg}
		for _, a := range v {
			if err, ok := a.(error); ok {
				fe.errs = append(fe.errs, err)
			}
		}
		l.err = fe
		close(l.failed)
	})
}

// fatalError is a fatal error nats-server logged: its words, and the
// errors it was made from (a listener's, say), so that a caller tells what
// failed with errors.Is and errors.As, not by the words.
type fatalError struct {
	msg  string
	errs []error
}

func (e *fatalError) Error() string   { return "nats-server: fatal: " + e.msg }
func (e *fatalError) Unwrap() []error { return e.errs }

// fatal returns the first fatal error, or nil.
func (l *natsLogger) fatal() error {
	select {
	case <-l.failed:
		return l.err
	default:
		return nil
	}
}

// serverLog is what one server.Server logs to: the Server's log, which
// also wakes StoreWatch when an error or warning may come from a store
// that cannot write ("critical write error", "out of space", "disabling
// JetStream" and the like; the hint only hastens the check, the health
// check decides).
//
// A fatal error goes to start until the server is ready (started): for the
// first server that is the Server's log too, and Start fails with it; for
// one a restart makes it is that start's own, so the restart fails and is
// tried again, while the Server is not reported broken.
type serverLog struct {
	*natsLogger
	start   *natsLogger
	started atomic.Bool
	hint    chan struct{}
}

func (l *serverLog) Errorf(format string, v ...any) {
	l.natsLogger.Errorf(format, v...)
	l.poke()
}

func (l *serverLog) Warnf(format string, v ...any) {
	l.natsLogger.Warnf(format, v...)
	l.poke()
}

func (l *serverLog) Fatalf(format string, v ...any) {
	if !l.started.Load() {
		l.start.Fatalf(format, v...)
		return
	}
	l.natsLogger.Fatalf(format, v...)
}

func (l *serverLog) poke() {
	select {
	case l.hint <- struct{}{}:
	default:
	}
}

// repeatWindow is how long a message's likes are counted, not logged.
const repeatWindow = time.Minute

// maxRepeats bounds the messages remembered: past it, those whose window
// is over go, and if none has, nothing more is held back.
const maxRepeats = 256

var (
	words     = regexp.MustCompile(`[A-Za-z0-9_-]+`)
	digitRuns = regexp.MustCompile(`[0-9]+`)
)

// likeness is what messages alike have in common: msg with the digits of
// its numbers made alike. A word beginning with a letter is a name and
// kept whole: the hub names each workstation's leaf connection, and ws1
// to ws18 connecting were logged as ws1 alone, 17 more "like it".
func likeness(msg string) string {
	return words.ReplaceAllStringFunc(msg, func(w string) string {
		if c := w[0]; c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' {
			return w
		}
		return digitRuns.ReplaceAllLiteralString(w, "#")
	})
}

// repeats counts the messages like one another that the server logs.
// Messages are alike when they differ only in the digits of their numbers
// (likeness): the server names a connection by its address, port and id,
// new at every try.
type repeats struct {
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	since time.Time // when the message was last logged
	n     int       // its likes since, not logged
}

// note reports whether msg is to be logged at now, and how many like it
// were held back since the last one logged.
func (r *repeats) note(msg string, now time.Time) (held int, log bool) {
	key := likeness(msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.seen[key]; p != nil {
		if now.Sub(p.since) < repeatWindow {
			p.n++
			return 0, false
		}
		held, p.since, p.n = p.n, now, 0
		return held, true
	}
	if len(r.seen) >= maxRepeats {
		for k, p := range r.seen {
			if now.Sub(p.since) >= repeatWindow {
				delete(r.seen, k)
			}
		}
		if len(r.seen) >= maxRepeats {
			return 0, true
		}
	}
	if r.seen == nil {
		r.seen = map[string]*repeat{}
	}
	r.seen[key] = &repeat{since: now}
	return 0, true
}
