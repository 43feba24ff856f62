package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// NodeInboxPrefix is node's reply-subject prefix, "_INBOX_<node>". The hub
// lets a node receive replies only there, so the daemon's connection uses
// it, and the downloader knows from it which node it works for.
func NodeInboxPrefix(node string) string { return "_INBOX_" + node }

// HubConsumerName is the name of node's downloader consumer on PI_HUB: the
// one consumer the hub lets node create (embedded.NodePermissions), so that
// a node can neither make durables of its own choosing nor touch another
// node's consumer.
func HubConsumerName(node string) string { return "dl_" + node }

// hubConsumerName names the consumer of the downloader on nc: after the
// node whose inbox prefix nc has. A connection without one (an open hub,
// tests) gets a random name, unique like an ordered consumer's.
func hubConsumerName(nc *nats.Conn) string {
	if node, ok := strings.CutPrefix(nc.Opts.InboxPrefix, "_INBOX_"); ok && ValidNodeID(node) {
		return HubConsumerName(node)
	}
	return "dl_" + nuid.Next()
}

// openHubConsumer creates the downloader's consumer on PI_HUB where cfg
// says to start. It replaces the ordered consumer the downloader used: an
// ordered consumer appends a serial to its name at every reset, and the
// hub can grant a node only a fixed name. So this is a plain pull consumer
// with the node's fixed name, configured as the ordered consumer was (no
// acks, memory storage, one replica, removed by the hub after
// InactiveThreshold idle), replaced on every start, and delivering in
// order with nothing missing (see orderedPull).
func openHubConsumer(ctx context.Context, nc *nats.Conn, hub jetstream.JetStream, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	name := hubConsumerName(nc)
	cc := jetstream.ConsumerConfig{
		Name:              name,
		DeliverPolicy:     cfg.DeliverPolicy,
		OptStartSeq:       cfg.OptStartSeq,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: cfg.InactiveThreshold,
		Replicas:          1,
		MemoryStorage:     true,
	}
	if cc.InactiveThreshold == 0 {
		cc.InactiveThreshold = 5 * time.Minute
	}
	if len(cfg.FilterSubjects) == 1 {
		cc.FilterSubject = cfg.FilterSubjects[0]
	} else {
		cc.FilterSubjects = cfg.FilterSubjects
	}
	// The previous run's consumer (a restart, a reconnect) cannot be
	// moved to a new start sequence: remove it first.
	if err := hub.DeleteConsumer(ctx, HubStream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("replace consumer %s: %w", name, err)
	}
	cons, err := hub.CreateConsumer(ctx, HubStream, cc)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	return &orderedPull{Consumer: cons, hub: hub, name: name}, nil
}

// orderedPull hands over a pull consumer's messages only in order and
// with none missing, as an ordered consumer does: with no acks, a message
// lost on the way (a leaf link that dropped mid-pull) is gone for good,
// and the downloader would copy what follows it into PI_ALL. On a gap it
// hands over nothing more and deletes the consumer on the hub: the pending
// pull then ends with "consumer deleted", which Consume reports to its
// error handler, and the downloader starts over from what PI_ALL holds.
// Only Consume, what the downloader's Pump uses, checks the order; the
// other methods are the plain consumer's.
type orderedPull struct {
	jetstream.Consumer
	hub  jetstream.JetStream
	name string
}

// Consume consumes in order; see orderedPull.
func (c *orderedPull) Consume(handler jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	stop := make(chan struct{})
	var once sync.Once
	// The client calls the handler from one goroutine at a time, so
	// next and broken need no lock.
	next, broken := uint64(1), false
	cc, err := c.Consumer.Consume(func(m jetstream.Msg) {
		if broken {
			return
		}
		if meta, err := m.Metadata(); err == nil && meta.Sequence.Consumer == next {
			next++
			handler(m)
			return
		}
		broken = true
		c.deleteUntilStopped(stop)
	}, opts...)
	if err != nil {
		return nil, err
	}
	return &stopSignal{ConsumeContext: cc, stop: func() { once.Do(func() { close(stop) }) }}, nil
}

// deleteUntilStopped deletes the consumer on the hub, retrying every
// second until it is gone or the consumer is stopped.
func (c *orderedPull) deleteUntilStopped(stop <-chan struct{}) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.hub.DeleteConsumer(ctx, HubStream, c.name)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Second):
		}
	}
}

// stopSignal tells orderedPull's handler that the consumer stops, so that
// a retry in the handler cannot hold the stop up.
type stopSignal struct {
	jetstream.ConsumeContext
	stop func()
}

func (s *stopSignal) Stop() {
	s.stop()
	s.ConsumeContext.Stop()
}

func (s *stopSignal) Drain() {
	s.stop()
	s.ConsumeContext.Drain()
}
