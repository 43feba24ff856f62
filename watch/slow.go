package watch

import (
	"sort"
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
type reading struct {
	path  string
	since time.Time
}

// begin records that w reads path from now; end, that it is done.
func (w *worker) begin(path string) { w.on.Store(&reading{path: path, since: time.Now()}) }
func (w *worker) end()              { w.on.Store(nil) }

// SlowFile is a file a worker has been reading for longer than slowAfter:
// the other files of that worker wait for it.
type SlowFile struct {
	File    string  `json:"file"`
	Seconds float64 `json:"seconds"`
}

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
		out = append(out, SlowFile{File: t.relOrPath(r.path), Seconds: time.Since(r.since).Round(time.Second).Seconds()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seconds > out[j].Seconds })
	return out
}

// warnSlow names, once, each file a worker has been reading for longer
// than slowAfter, at a walk (the walks run every rescan interval).
func (d *discovery) warnSlow() {
	for _, r := range d.t.longReads() {
		if r == d.slowSaid {
			continue
		}
		d.slowSaid = r
		d.t.logger.Warn("a session file has been read for long; the other files of its worker wait for it (a file of hundreds of GB, or a network mount that does not answer)",
			"file", d.t.relOrPath(r.path), "for", time.Since(r.since).Round(time.Second), "hint", "move the file out of the sessions dir if it is not a session of pi's")
	}
}
