// Package eventlog is pisyncd's event log on NATS JetStream: subject naming,
// stream set-up, exactly-once publishing of session lines (single messages,
// atomic batches, chunked large lines) and reading a session's events back.
//
// An event is one line of a pi session file, stored byte for byte as the
// message payload on the subject of its origin node and session. Metadata
// travels in Pi-* headers, never in the subject. The stream itself is the
// checkpoint: a publisher learns where it stands by reading what the stream
// holds, so there is no offset file that could drift from the truth.
package eventlog
