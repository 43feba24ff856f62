// Package replicate writes other machines' session lines into this
// machine's pi sessions dir as native pi files, so that `pi --resume` here
// lists and continues sessions begun elsewhere.
//
// Events come from PI_ALL (this machine's copy of the hub's PI_HUB, which
// the downloader makes) in stream order. A new session's file is staged
// under a hidden name and linked into place at the path pi itself would
// use here (the header's cwd mapped through the configured path mappings);
// existing files get whole-line O_APPEND writes, parents before children. Each file's lines are known by sha-256, so
// redelivery, replays after a restart and crashes never duplicate a line.
// Writes wait while a local pi is appending to the same file. Nothing is
// ever written outside the sessions root, whatever a remote event says.
package replicate
