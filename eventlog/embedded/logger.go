package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
)

// natsLogger adapts slog to server.Logger. Its Fatalf does not exit: the
// server calls Fatalf for errors it cannot start with (e.g. "Can't start
// JetStream") and then carries on half-started, so the error is recorded
// and the owner decides what to do.
type natsLogger struct {
	log *slog.Logger

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

func (l *natsLogger) Noticef(format string, v ...any) { l.emit(slog.LevelInfo, format, v) }
func (l *natsLogger) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *natsLogger) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *natsLogger) Debugf(format string, v ...any)  { l.emit(slog.LevelDebug, format, v) }

// Tracef is only called when the server was given the trace flag
// (Config.Trace); slog has no trace level, so it logs at debug.
func (l *natsLogger) Tracef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }

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
