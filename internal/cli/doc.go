// Package cli holds the command-line code both binaries share: pisyncd
// (the daemon and every command) and pisync, the lean client for the
// commands that need only a file. Flags and usage errors, the one-shot
// context of a session file, the human summary of a context and the
// build's version live here; nothing here may import the embedded server,
// the search index, the web view or the metrics registry, because pisync
// links this package and starts in a fraction of pisyncd's time
// (internal/archtest keeps it so).
package cli
