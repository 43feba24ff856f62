package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/metrics"
)

// ReadRelay answers the local listener's readers' direct gets, with the
// daemon's own, one request at a time. A reader asks as it would ask
// JetStream ($JS.API.DIRECT.GET.<stream>, imported from readGetPrefix) and
// gets JetStream's answer.
//
// Exporting the streams' own direct gets to readAccount would be simpler,
// but nats-server puts a direct get's answer in the stream's outgoing
// queue, which has no bound, faster than it delivers it: sixteen readers
// that asked for the same megabyte again and again and never read the
// answers grew the server's heap by 4.3 GiB in ten seconds. Here one
// request at a time is in the server, at most relayQueue wait (more are
// dropped: the reader's request times out), and an answer goes into the
// reader's connection, which the server closes as a slow consumer at its
// max pending.
type ReadRelay struct {
	nc                *nats.Conn // its own: nats.go's drops are counted, not logged
	log               *slog.Logger
	answered, dropped atomic.Int64
}

// ReadRelayStats are the relay's counts since the daemon started.
type ReadRelayStats struct {
	// Answered counts the readers' requests answered, Dropped those
	// dropped because relayQueue were waiting.
	Answered int64 `json:"readsAnswered"`
	Dropped  int64 `json:"readsDropped"`
}

// Stats returns the relay's counts.
func (r *ReadRelay) Stats() ReadRelayStats {
	return ReadRelayStats{Answered: r.answered.Load(), Dropped: r.dropped.Load()}
}

// Collectors returns the relay's Prometheus metrics.
func (r *ReadRelay) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("listener_reads_total", "Direct gets of the local listener's readers answered by the read relay.", r.answered.Load),
		metrics.Counter("listener_reads_dropped_total", "Direct gets of the local listener's readers dropped: 256 were waiting already.", r.dropped.Load),
	}
}

// readGetPrefix is where the relay takes readers' requests, in the
// daemon's account: pi.live.get.<stream>[.<subject>], local only as every
// subject under eventlog.LivePrefix.
const readGetPrefix = eventlog.LivePrefix + ".get"

const (
	relayQueue    = 256     // requests waiting, at most
	relayBatch    = 256     // messages in one answer, at most
	relayMaxBytes = 4 << 20 // bytes in one answer, at most (and one message)
	relayTimeout  = 5 * time.Second
)

// OpenReadRelay connects the relay of a server with a listener; nil
// without. Its in-process connection follows the server through a restart
// (StoreWatch) as every other does; it is made before, since a connect
// while the server restarts fails.
func (s *Server) OpenReadRelay(log *slog.Logger) (*ReadRelay, error) {
	if s.credsPath == "" {
		return nil, nil
	}
	nc, err := s.Connect(nats.Name("pisyncd read relay"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {
		// Dropped requests are counted in Run; nothing else is
		// asynchronous on this connection.
	}))
	if err != nil {
		return nil, fmt.Errorf("read relay: %w", err)
	}
	return &ReadRelay{nc: nc, log: log}, nil
}

// Close closes the relay's connection.
func (r *ReadRelay) Close() { r.nc.Close() }

// Run answers requests until ctx ends.
func (r *ReadRelay) Run(ctx context.Context) error {
	sub, err := r.nc.SubscribeSync(readGetPrefix + ".>")
	if err != nil {
		return fmt.Errorf("read relay: %w", err)
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(relayQueue, relayQueue*readMaxPayload); err != nil {
		return fmt.Errorf("read relay: %w", err)
	}
	var warned time.Time
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, nats.ErrSlowConsumer) {
			n, _ := sub.Dropped()
			if d := int64(n) - r.dropped.Swap(int64(n)); d > 0 && time.Since(warned) > time.Minute {
				warned = time.Now()
				r.log.Warn("local readers' requests dropped: more were waiting than the relay keeps", "dropped", n, "waiting_max", relayQueue)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read relay: %w", err)
		}
		if m.Reply != "" {
			r.answer(ctx, m)
			r.answered.Add(1)
		}
	}
}

// getRequest is what a reader may ask of a direct get; anything else is
// refused.
type getRequest struct {
	Seq        uint64 `json:"seq,omitempty"`
	LastBySubj string `json:"last_by_subj,omitempty"`
	NextBySubj string `json:"next_by_subj,omitempty"`
	Batch      int    `json:"batch,omitempty"`
	MaxBytes   int    `json:"max_bytes,omitempty"`
}

// answer relays one request's answer, JetStream's, or a 400 for a request
// the relay does not pass on.
func (r *ReadRelay) answer(ctx context.Context, m *nats.Msg) {
	stream, subj, bySubject := strings.Cut(strings.TrimPrefix(m.Subject, readGetPrefix+"."), ".")
	if !readable(stream) {
		r.reply(m.Reply, "404", "no such stream")
		return
	}
	api := "$JS.API.DIRECT.GET." + stream
	if bySubject {
		// The last message on subj: one answer.
		r.relay(ctx, m.Reply, api+"."+subj, nil, false)
		return
	}
	body, batch, ok := relayedRequest(m.Data)
	if !ok {
		r.reply(m.Reply, "400", "bad request: want seq, last_by_subj, next_by_subj, batch, max_bytes")
		return
	}
	r.relay(ctx, m.Reply, api, body, batch)
}

// relayedRequest is the request the relay makes of JetStream for a
// reader's: its fields, with the batch and its bytes bounded, or !ok.
func relayedRequest(data []byte) (body []byte, batch, ok bool) {
	var req getRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return nil, false, false
	}
	batch = req.Batch > 0
	req.Batch = max(0, min(req.Batch, relayBatch))
	if req.MaxBytes <= 0 || req.MaxBytes > relayMaxBytes {
		req.MaxBytes = relayMaxBytes
	}
	if !batch {
		req.MaxBytes = 0 // JetStream takes it with a batch only
	}
	body, err := json.Marshal(req)
	return body, batch, err == nil
}

// relay asks JetStream and passes on its answer: one message, or a batch
// up to its end (status 204) or a status.
func (r *ReadRelay) relay(ctx context.Context, to, api string, body []byte, batch bool) {
	inbox := r.nc.NewRespInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		r.reply(to, "500", "relay: "+err.Error())
		return
	}
	defer sub.Unsubscribe()
	if err := r.nc.PublishRequest(api, inbox, body); err != nil {
		r.reply(to, "500", "relay: "+err.Error())
		return
	}
	for {
		wait, cancel := context.WithTimeout(ctx, relayTimeout)
		a, err := sub.NextMsgWithContext(wait)
		cancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders): // nats.go's reading of an empty 503
			r.reply(to, "404", "no such stream")
			return
		case err != nil:
			r.reply(to, "408", "relay: the stream did not answer in time")
			return
		}
		if err := r.nc.PublishMsg(&nats.Msg{Subject: to, Header: a.Header, Data: a.Data}); err != nil {
			return
		}
		if !batch || a.Header.Get("Status") != "" {
			return
		}
	}
}

// reply answers with a status and no data, as JetStream does.
func (r *ReadRelay) reply(to, status, desc string) {
	r.nc.PublishMsg(&nats.Msg{Subject: to, Header: nats.Header{"Status": []string{status}, "Description": []string{desc}}})
}

// readable reports whether readers read stream.
func readable(stream string) bool { return eventlog.LiveRePublish(stream) != nil }
