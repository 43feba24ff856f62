package watch

import (
	"sort"
	"sync/atomic"
	"time"
)

// A worker owns its share of the files and reads them one at a time, so a
// read that takes long (a file of hundreds of GB, a hung network mount
// under the sessions dir) holds up every other file of that worker, and
// nothing said which file it was (a probe on 2026-12-06 found one of
// eight workers' files waiting behind such a read, with status and the
// log silent). Each worker says which file it is on; status and the first
// read's progress name the files read for longer than slowAfter.

// slowAfter is how long a file is read before it is named as slow.
const slowAfter = 10 * time.Second

// reading is the file a worker is on, and since when. Its path is made
// relative only when a slow file is named: handle runs for every change.
// read is the worker's count of bytes read from files, from at the start.
type reading struct {
	path  string
	since time.Time
	read  *atomic.Int64
	from  int64
}

// begin records that w reads path from now; end, that it is done.
func (w *worker) begin(path string) {
	w.on.Store(&reading{path: path, since: time.Now(), read: &w.bytesRead, from: w.bytesRead.Load()})
}
func (w *worker) end() { w.on.Store(nil) }

// bytes is how much of its file the read has taken so far.
func (r *reading) bytes() int64 { return r.read.Load() - r.from }

// SlowFile is a file a worker has been reading for longer than slowAfter:
// the other files of that worker wait for it. BytesRead says whether the
// read moves on: a large session read as it is written (pi writing a
// session of 58 MB in seconds took 13 s to read and publish), or one that
// does not answer.
type SlowFile struct {
	File      string  `json:"file"`
	Seconds   float64 `json:"seconds"`
	BytesRead int64   `json:"bytesRead"`
}

// movesOn reports whether a read that took read bytes in elapsed goes
// at the pace of a large file being read, not of one that does not answer.
func movesOn(read int64, elapsed time.Duration) bool {
	return float64(read) >= movingRate*elapsed.Seconds()
}

// movingRate is the pace, bytes a second, of a read that moves on: a
// hung network mount gives nothing, a large session tens of megabytes.
const movingRate = 1 << 20

// longReads returns what the workers have been reading for longer than
// slowAfter.
func (t *Tailer) longReads() []reading {
	var out []reading
	for _, w := range t.workers {
		if r := w.on.Load(); r != nil && time.Since(r.since) > t.slowAfter {
			out = append(out, *r)
		}
	}
	return out
}

// relOrPath is path relative to the sessions dir, as the log and status
// name files, or path itself.
func (t *Tailer) relOrPath(path string) string {
	if rel, err := t.rel(path); err == nil {
		return rel
	}
	return path
}

// slowFiles returns the files workers have been on for longer than
// slowAfter, the longest first.
func (t *Tailer) slowFiles() []SlowFile {
	var out []SlowFile
	for _, r := range t.longReads() {
		out = append(out, SlowFile{File: t.relOrPath(r.path), Seconds: time.Since(r.since).Round(time.Second).Seconds(), BytesRead: r.bytes()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seconds > out[j].Seconds })
	return out
}

// warnSlow names, once, each file a worker has been reading for longer
// than slowAfter, at a walk (the walks run every rescan interval): a
// warning for a read that gives next to nothing, a line of information for
// one that moves on (movesOn), which was a false alarm.
func (d *discovery) warnSlow() {
	for _, r := range d.t.longReads() {
		if r == d.slowSaid {
			continue
		}
		d.slowSaid = r
		took, read := time.Since(r.since), r.bytes()
		if movesOn(read, took) {
			d.t.logger.Info("a large session file is being read; the other files of its worker wait for it",
				"file", d.t.relOrPath(r.path), "for", took.Round(time.Second), "bytes_read", read)
			continue
		}
		d.t.logger.Warn("a session file has been read for long; the other files of its worker wait for it (a file of hundreds of GB, or a network mount that does not answer)",
			"file", d.t.relOrPath(r.path), "for", took.Round(time.Second), "bytes_read", read, "hint", "move the file out of the sessions dir if it is not a session of pi's")
	}
}
