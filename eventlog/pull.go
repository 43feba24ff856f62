package eventlog

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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

// localHeartbeat is how often the local server tells a waiting pull that
// it is still there. Two missed, and nats.go pulls again (an ordered
// consumer starts over from its cursor): its only way to learn that a pull
// it counts as outstanding is gone. One went missing in about one first
// read in 25 of 10,000 sessions: the server held no pull and 45,000
// messages undelivered while the client still counted more than half a
// pull to come. With nats.go's default for an ordered consumer (5 s) the
// views waited 10 s for it (docs/PERFORMANCE.md, "The stall, found"). Its
// cause, in the client or the server, was not found; a pull whose bytes
// run out exactly at a message ends the same way (TestFollowRecoversLostPull).
// An idle pull costs a wake-up a second for it.
const localHeartbeat = time.Second

// LocalHeartbeat makes a pull of the local server ask for localHeartbeat.
func LocalHeartbeat() PullOpt { return jetstream.PullHeartbeat(localHeartbeat) }
