// Package watch follows pi's session files and turns every complete line
// into an event, exactly once.
//
// fsnotify is only a hint that a file changed; a periodic rescan of the whole
// tree (size, mtime, inode) is the correctness path. Each file is read from
// the offset of its last complete line; a partial last line waits until its
// '\n' arrives. Before reading on, the tailer checks that the file still
// holds the header and the last line it consumed, so an in-place rewrite
// (pi's v1/v2 migration), a truncation or a replaced file is read again from
// the start. What is published is decided by the event log, not by offsets:
// a line whose sha-256 the session's subject already holds is never
// published again, so re-reading a file, restarting, or a crash between a
// publish and anything else can never duplicate an event.
package watch
