package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Attacker is a registered node of a team gone rogue (or a stolen laptop):
// it holds its own credentials for the hub's client port but runs no
// pisyncd, only this nats.go client, and publishes whatever it likes on
// the subjects the hub lets it write, pi.up.<node>.<sid>.
//
// It speaks the wire format by its literal header names rather than
// through the eventlog package: an attacker owes the daemon's code
// nothing, and testenv stays importable from every package's tests.
type Attacker struct {
	Node string
	nc   *nats.Conn
	js   jetstream.JetStream

	mu     sync.Mutex
	srcSeq map[string]uint64 // per subject: the last Pi-Src-Seq sent
}

// Forged is one message an attacker publishes. The zero value of a field
// leaves its header out, except Sha: empty means the sha-256 of Payload, as
// an honest forwarder sends; set NoSha to leave it out.
type Forged struct {
	ID, Parent, Type, File, Op, Chunk string
	Sha                               string
	NoSha                             bool
	Payload                           []byte
}

// NewAttacker connects node to url (the hub's client port) with opts (its
// nkey, the CA, its inbox prefix) and uses JetStream in domain. The
// connection is closed when the test ends.
func NewAttacker(tb testing.TB, url, node, domain string, opts ...nats.Option) *Attacker {
	tb.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("attacker-" + node)}, opts...)...)
	if err != nil {
		tb.Fatalf("attacker %s: connect: %v", node, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.NewWithDomain(nc, domain)
	if err != nil {
		tb.Fatalf("attacker %s: jetstream: %v", node, err)
	}
	return &Attacker{Node: node, nc: nc, js: js, srcSeq: map[string]uint64{}}
}

// Subject is the attacker's hub subject for a session token (a plain
// session id is its own token).
func (a *Attacker) Subject(sidToken string) string { return "pi.up." + a.Node + "." + sidToken }

// Publish stores one forged message on the attacker's subject of sidToken
// and waits for the hub's acknowledgement. Every message carries a
// Pi-Src-Seq one above the subject's last, as the hub's checkpoint rule
// expects of a forwarder.
func (a *Attacker) Publish(ctx context.Context, sidToken string, f Forged) error {
	subj := a.Subject(sidToken)
	m := nats.NewMsg(subj)
	m.Data = f.Payload
	set := func(k, v string) {
		if v != "" {
			m.Header.Set(k, v)
		}
	}
	set("Pi-Id", f.ID)
	set("Pi-Parent", f.Parent)
	set("Pi-Type", f.Type)
	set("Pi-File", f.File)
	set("Pi-Op", f.Op)
	set("Pi-Chunk", f.Chunk)
	if !f.NoSha {
		sha := f.Sha
		if sha == "" {
			sum := sha256.Sum256(f.Payload)
			sha = hex.EncodeToString(sum[:])
		}
		m.Header.Set("Pi-Sha", sha)
	}
	a.mu.Lock()
	a.srcSeq[subj]++
	m.Header.Set("Pi-Src-Seq", strconv.FormatUint(a.srcSeq[subj], 10))
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := a.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("attacker %s: publish on %s: %w", a.Node, subj, err)
	}
	return nil
}

// MustPublish is Publish that fails the test on an error.
func (a *Attacker) MustPublish(tb testing.TB, sidToken string, f Forged) {
	tb.Helper()
	if err := a.Publish(context.Background(), sidToken, f); err != nil {
		tb.Fatal(err)
	}
}

// Line publishes raw as one whole session line with a correct Pi-Sha:
// what an honest forwarder would send for a line pi wrote.
func (a *Attacker) Line(tb testing.TB, sidToken, id, parent, typ string, raw []byte) {
	tb.Helper()
	a.MustPublish(tb, sidToken, Forged{ID: id, Parent: parent, Type: typ, Payload: raw})
}

// OpenBatch starts an atomic batch on the attacker's subject of sidToken
// and never finishes it: the hub keeps it open until its batch timeout.
func (a *Attacker) OpenBatch(tb testing.TB, sidToken, batchID string) {
	tb.Helper()
	if err := a.nc.PublishMsg(a.batchStart(sidToken, batchID)); err != nil {
		tb.Fatalf("attacker %s: open batch: %v", a.Node, err)
	}
}

// batchStart is the first message of an atomic batch on the attacker's
// subject of sidToken.
func (a *Attacker) batchStart(sidToken, batchID string) *nats.Msg {
	m := nats.NewMsg(a.Subject(sidToken))
	m.Data = []byte("{}")
	m.Header.Set("Nats-Batch-Id", batchID)
	m.Header.Set("Nats-Batch-Sequence", "1")
	return m
}

// Batch stores one message on the attacker's subject of sidToken as an
// atomic batch of its own, and returns the hub's answer to the commit.
func (a *Attacker) Batch(ctx context.Context, sidToken, batchID string) error {
	m := a.batchStart(sidToken, batchID)
	m.Header.Set("Nats-Batch-Commit", "1")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := a.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("attacker %s: batch: %w", a.Node, err)
	}
	return nil
}

// Flush waits until the hub has read what the attacker sent.
func (a *Attacker) Flush(tb testing.TB) {
	tb.Helper()
	if err := a.nc.Flush(); err != nil {
		tb.Fatalf("attacker %s: flush: %v", a.Node, err)
	}
}

// Raw stores a message of the attacker's own making on its subject of
// sidToken, headers and all, and waits for the hub's acknowledgement.
func (a *Attacker) Raw(tb testing.TB, sidToken string, hdr nats.Header, data []byte) {
	tb.Helper()
	m := nats.NewMsg(a.Subject(sidToken))
	m.Header, m.Data = hdr, data
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.js.PublishMsg(ctx, m); err != nil {
		tb.Fatalf("attacker %s: publish on %s: %v", a.Node, m.Subject, err)
	}
}
