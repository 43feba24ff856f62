package watch

import "time"

// ignoreReason says why a *.jsonl file is left alone. Each is counted in
// Stats.FilesIgnoredBy and logged once per file (again only when the file
// is replaced, truncated or rewritten).
type ignoreReason uint8

const (
	// ignoreNotSession: its first JSON object is not a session header
	// (pi refuses such a file too).
	ignoreNotSession ignoreReason = iota
	// ignoreLongID: its header's id is too long to name a subject
	// (eventlog.CheckSID); publishing it would break the connection
	// every session shares.
	ignoreLongID
	// ignoreSpecial: a FIFO, socket or device, never opened for reading.
	ignoreSpecial
	// ignoreForeign: another user's file, or a link another user made
	// (owner.go), never read.
	ignoreForeign
	// ignoreLongHeader: its first line, most likely its header, is
	// longer than PISYNC_MAX_LINE (pi loads it: a warning, where a file
	// pi refuses too is only noted).
	ignoreLongHeader
	numIgnoreReasons
)

var ignoreNames = [numIgnoreReasons]string{"not-a-session", "session-id-too-long", "not-a-regular-file", "another-users-file", "first-line-too-long"}

var ignoreMessages = [numIgnoreReasons]string{
	"not a pi session file; ignoring it",
	"session id too long for a subject; ignoring the file",
	"not a regular file; ignoring it",
	"another user's file in the sessions dir; ignoring it (only this user's files are published: chmod o-w the sessions dir and its folders, so that no other user can put files there)",
	"a session file whose first line is longer than PISYNC_MAX_LINE; ignoring it",
}

func (r ignoreReason) String() string { return ignoreNames[r] }

// ignore leaves f alone from now on, and says so once.
func (t *Tailer) ignore(f *file, why ignoreReason, attrs ...any) {
	f.status, f.ignored = statusIgnored, why
	t.filesIgnored.Add(1)
	t.ignoredBy[why].Add(1)
	attrs = append([]any{"file", f.rel}, attrs...)
	now := time.Now().UnixNano()
	switch {
	case now-f.ignoredAt < int64(time.Minute):
		// Said within the minute: a file another user swaps in and out
		// of its name made 4,767 warnings in 20 s (a probe, 2026-12-07).
		t.logger.Debug(ignoreMessages[why], attrs...)
		return
	case why == ignoreNotSession:
		t.logger.Info(ignoreMessages[why], attrs...)
	default:
		t.logger.Warn(ignoreMessages[why], attrs...)
	}
	f.ignoredAt = now
}
