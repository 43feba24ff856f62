package eventlog

// SnapshotStream exposes the upgrade's first step, so that tests can cut
// an upgrade short where a crash would.
var SnapshotStream = snapshotStream
