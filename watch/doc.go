// Package watch follows pi's session files and turns every complete line
// into an event, exactly once.
//
// fsnotify is only a hint that a file changed; a periodic rescan of the whole
// tree (size, mtime, inode) is the correctness path. Each file is read from
// the offset of its last complete line, and every byte once: a partial last
// line waits until its '\n' arrives, with its hash kept running, so a line
// written in many pieces is not read again from its start at each piece; a
// line that did not come whole in one read is read back once, when
// complete. What the tailer holds of lines at once, across its workers, is
// bounded by a memory budget. Before reading on, the tailer checks that the
// file still holds the start of the header and the last bytes it consumed,
// so an in-place rewrite (pi's v1/v2 migration), a truncation or a replaced
// file is read again from the start; a change of mtime without a change of
// size (an edit in place) makes it read the file again too. What is
// published is decided by the event log, not by offsets: a line whose
// sha-256 the session's subject already holds is never published again, so
// re-reading a file, restarting, or a crash between a publish and anything
// else can never duplicate an event.
//
// Files that are not pi sessions, FIFOs and other special files (never
// opened for reading) and sessions whose id could not name a subject are
// left alone, each counted by reason. Links are followed as pi follows
// them, one level into a linked project folder, and no file is followed
// under two paths.
package watch
