package watch

import "time"

// A file that keeps getting lines that are not JSON (a tool logging into
// the sessions dir) warned at every read: 864,000 lines a day at ten a
// second. Its warning now comes at most once a minute, counting the lines
// skipped since the last one.
const malformedEvery = time.Minute

// malformedLog is a file's held-back warning.
type malformedLog struct {
	last    time.Time // when the last warning was logged
	pending int       // lines skipped since, not yet in a warning
}

// maxMalformedLogs bounds the files whose warnings are held back; past it
// the record starts again (a warning more for some files).
const maxMalformedLogs = 4096

// malformedWarn warns of n malformed lines skipped in file rel, or holds
// them for the next warning when the last was within malformedEvery.
func (w *worker) malformedWarn(rel string, n int, now time.Time) {
	if w.malformed == nil || len(w.malformed) >= maxMalformedLogs {
		w.malformed = map[string]malformedLog{}
	}
	m := w.malformed[rel]
	m.pending += n
	if !m.last.IsZero() && now.Sub(m.last) < malformedEvery {
		w.malformed[rel] = m
		return
	}
	w.t.logger.Warn("malformed lines skipped (such a warning comes at most once a minute for a file)", "file", rel, "count", m.pending)
	w.malformed[rel] = malformedLog{last: now}
}
