package eventlog

// OpenHubConsumer exposes the downloader's consumer to the package's
// external tests.
var OpenHubConsumer = openHubConsumer

// SnapshotStream exposes the upgrade's first step, so that tests can cut
// an upgrade short where a crash would.
var SnapshotStream = snapshotStream
