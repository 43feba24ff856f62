package eventlog

import "github.com/nats-io/nats.go/jetstream"

// pullMessages is the most messages a consumer asks for at once. Its queue
// is this long; a limit in bytes alone would make nats.go size the queue
// for a million messages, an 8 MB channel for every consumer and every
// read.
const pullMessages = 1024

// PullOpt bounds what a consumer has pulled and not yet handed over.
type PullOpt interface {
	jetstream.PullConsumeOpt
	jetstream.PullMessagesOpt
}

// PullLimit pulls at most maxBytes (and pullMessages messages) at a time.
func PullLimit(maxBytes int) PullOpt {
	return jetstream.PullMaxMessagesWithBytesLimit(pullMessages, maxBytes)
}
