package eventlog

// OpenHubConsumer exposes the downloader's consumer to the package's
// external tests.
var OpenHubConsumer = openHubConsumer
