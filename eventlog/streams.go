package eventlog

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream names.
const (
	LocalStream = "PI_LOCAL" // this node's own events
	HubStream   = "PI_HUB"   // every node's events, on the hub
	AllStream   = "PI_ALL"   // a workstation's mirror of PI_HUB
)

// MaxMsgSize bounds every message (headers included) of the event streams.
// It matches the 1 MiB max_payload that a stock hub has.
const MaxMsgSize = 1 << 20

// duplicateWindow is PI_LOCAL's Nats-Msg-Id window, as streams made before
// the local log stopped stamping ids have it (EnsureStream leaves a stream
// that holds its settings alone). The tailer's messages carry no id: each
// states its subject's expected last sequence, which refuses a retry after
// a lost ack, and restarts rely on reading the stream (OpenLocal).
const duplicateWindow = 2 * time.Minute

// LocalStreamConfig is PI_LOCAL: every event written on this node, kept
// forever, readable by direct get, open to atomic batches.
//
// Single messages may be deleted, for one reason: `pisyncd erase` removes
// a session that holds a leaked secret, and only a delete that overwrites
// the message on disk (a secure delete, one message at a time) leaves no
// copy of it in the store's files; a purge only marks messages deleted,
// and their bytes stay in the block until nats-server compacts it, which
// it never does to the block being written. A purge stays refused: one
// request could wipe the whole log.
func LocalStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               LocalStream,
		Description:        "pisyncd: lines appended to pi session files on this node",
		Subjects:           []string{LocalPrefix + ".>"},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardNew,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         MaxMsgSize,
		Duplicates:         duplicateWindow,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         false,
		DenyPurge:          true,
	}
}

// LivePrefix starts the subjects a workstation's streams republish each
// message on as they store it, while the daemon has a local listener
// (LiveStreams). The listener's readers receive them under the stream's
// own subjects: live, with the stream sequence in the headers, without a
// consumer of their own. They never leave the machine
// (embedded.LocalSubjects).
//
// Only with a listener: the server's work for each republished message
// (its headers, a copy, a publish nobody may hear) cost a first read of
// 10,000 sessions about a tenth of its rate (BenchmarkDaemonSessions,
// 2026-12-06).
const LivePrefix = "pi.live"

// LiveStream is a stream the local listener's readers follow.
type LiveStream struct {
	Stream   string // PI_LOCAL
	Subjects string // pi.evt.>: as stored, and as readers see them
	Live     string // pi.live.evt.>: where the stream republishes them
}

// LiveStreams are what the local listener's readers follow: PI_LOCAL,
// PI_ALL and the projection's bucket (projection.Bucket, pi_proj, which
// this package cannot import; TestBucketRePublish holds them together).
var LiveStreams = []LiveStream{
	{Stream: LocalStream, Subjects: LocalPrefix + ".>", Live: LivePrefix + ".evt.>"},
	{Stream: AllStream, Subjects: AllPrefix + ".>", Live: LivePrefix + ".all.>"},
	{Stream: "KV_pi_proj", Subjects: "$KV.pi_proj.>", Live: LivePrefix + ".kv.>"},
}

// LiveRePublish is how stream republishes for the local listener's
// readers (nil for a stream they do not follow).
func LiveRePublish(stream string) *jetstream.RePublish {
	for _, l := range LiveStreams {
		if l.Stream == stream {
			return &jetstream.RePublish{Source: l.Subjects, Destination: l.Live}
		}
	}
	return nil
}

// SetLive has stream republish for the local listener's readers (on) or
// not, leaving every other setting as it is, and a stream that is so
// already untouched (an update rewrites the meta file: EnsureStream).
func SetLive(ctx context.Context, js jetstream.JetStream, stream string, on bool) error {
	var rp *jetstream.RePublish
	if on {
		rp = LiveRePublish(stream)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("eventlog: stream %s: %w", stream, err)
	}
	cfg := s.CachedInfo().Config
	if reflect.DeepEqual(cfg.RePublish, rp) {
		return nil
	}
	cfg.RePublish = rp
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("eventlog: stream %s: republish: %w", stream, err)
	}
	return nil
}

// EnsureStream creates the stream or brings an existing one to cfg. A
// stream that already holds every setting cfg makes is left alone: an
// update rewrites the stream's meta file, then its checksum file, and in an
// encrypted store the meta file differs at every write (a fresh nonce), so
// a kill -9 between the two left a stream nats-server refuses to open, and
// every start made that window (TestSIGKILLExactlyOnceStoreCipher failed
// one run in twenty). A setting cfg leaves at its zero value is not reset
// on an existing stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, cfg.Name)
	if err == nil && holds(s.CachedInfo().Config, cfg) {
		return s, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("eventlog: stream %s: %w", cfg.Name, err)
	}
	s, err = js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("eventlog: stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

// holds reports whether have has every setting want makes (its fields
// that are not zero), and want's AllowDirect: the hub's streams turn it off
// (hubNoDirect), and older ones have it on.
func holds(have, want jetstream.StreamConfig) bool {
	if have.AllowDirect != want.AllowDirect {
		return false
	}
	hv, wv := reflect.ValueOf(have), reflect.ValueOf(want)
	for i := range wv.NumField() {
		if w := wv.Field(i); !w.IsZero() && !reflect.DeepEqual(w.Interface(), hv.Field(i).Interface()) {
			return false
		}
	}
	return true
}

// IsWrongLastSequence reports whether err says the expected last subject
// sequence did not match: someone else (or an earlier run) wrote first.
func IsWrongLastSequence(err error) bool {
	return hasErrorCode(err, jetstream.JSErrCodeStreamWrongLastSequence)
}

// hasErrorCode reports whether err is a JetStream API error with one of
// codes.
func hasErrorCode(err error, codes ...jetstream.ErrorCode) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && slices.Contains(codes, apiErr.ErrorCode)
}

// HubStreamConfig is PI_HUB on the hub cluster: every node's events, each
// node on its own pi.up.<node>.> subjects.
func HubStreamConfig(replicas int) jetstream.StreamConfig {
	if replicas < 1 {
		replicas = 1
	}
	c := LocalStreamConfig()
	c.Name = HubStream
	c.Description = "pisyncd: every node's session lines"
	c.Subjects = []string{UpPrefix + ".>"}
	c.Replicas = replicas
	c.AllowDirect = false // hubNoDirect
	return c
}

// hubNoDirect: the hub's streams answer no direct get. A direct get may
// ask for a batch of a thousand messages, and nats-server queues the
// answers without bound before it delivers them: a node's hundred requests
// for its own megabyte lines, answers unread, grew a hub from 89 MB to
// 3.56 GB. JetStream's message API (STREAM.MSG.GET) takes no batch, and its
// requests wait in a queue the server bounds. It answers in JSON too, so
// a node's stored message of no payload and a Status header is read as the
// message it is, where a direct get's reader takes it for the server's
// status (404: "no message"). A node may use only that API (embedded.NodePermissions).

// KeysStream holds, on the hub, the key messages of sealed sessions
// (end-to-end encryption): each data key, wrapped with a team key, once.
const KeysStream = "PI_KEYS"

// KeyMsgMax bounds a message on PI_KEYS: a key message is 81 bytes.
const KeyMsgMax = 256

// KeysStreamConfig is PI_KEYS on the hub cluster: each data key's key
// message on a subject of its own, pi.key.<node>.<token>.<kid>. A
// version 2 envelope names its key message by sequence (direct get). The
// stream keeps one message per subject, the newest: a node destroys its
// own key messages of a session (an erase) by publishing an empty
// tombstone on each of its key subjects, and nobody can destroy another
// node's, since a node publishes only on its own subjects and the stream
// allows no roll-up (which nats-server grants per stream: a node's
// "Nats-Rollup: all" on its own subject would wipe every node's keys), no
// delete and no purge. Full, it refuses new key messages (forwarding
// waits, as on a full PI_HUB) rather than drop the oldest, which would
// make the oldest sessions unreadable as if erased.
func KeysStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              KeysStream,
		Description:       "pisyncd: wrapped data keys of sealed sessions",
		Subjects:          []string{KeyPrefix + ".>"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardNew,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgsPerSubject: 1,
		MaxMsgSize:        KeyMsgMax,
		Replicas:          max(replicas, 1),
		AllowDirect:       false, // hubNoDirect
		AllowRollup:       false,
		DenyDelete:        true,
		DenyPurge:         true,
	}
}

// AllStreamConfig is PI_ALL on a workstation: a copy of the hub's PI_HUB
// that the downloader keeps (pi.up.<node>.<sid> becomes
// pi.all.<node>.<sid>, so that no local stream listens on the hub's
// subjects). Not a native mirror: a mirror stores and syncs one message at a
// time under sync always, and after failures backs off for up to two
// minutes; the downloader writes atomic batches and retries within seconds.
func AllStreamConfig() jetstream.StreamConfig {
	c := LocalStreamConfig()
	c.Name = AllStream
	c.Description = "pisyncd: this node's copy of the hub's PI_HUB"
	c.Subjects = []string{AllPrefix + ".>"}
	c.Duplicates = 0 // one writer stating the expected last sequence: no ids needed
	return c
}

// HasLines reports whether PI_ALL holds a line (not only control events)
// that node published for session sid: who may delete, restore or erase a
// session is decided by it.
func (a *All) HasLines(ctx context.Context, node, sid string) (bool, error) {
	subj := AllSubject(node, sid)
	seq := uint64(1)
	// Control events before a first line are rare (a deletion, then a
	// restore): a few steps are enough, and bound what a node can cost us.
	for range 16 {
		m, err := a.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("eventlog: read %s: %w", subj, err)
		}
		if m.Header.Get(HdrOp) == "" {
			return true, nil
		}
		seq = m.Sequence + 1
	}
	return false, nil
}

// lastSrc is the origin position (Pi-Src-Seq) of the last line of node's
// session sid that PI_ALL holds, 0 for none. An origin's lines of a
// session reach the hub in the order of their positions, so a line at or
// before it is held.
func (a *All) lastSrc(ctx context.Context, node, sid string) (uint64, error) {
	m, err := a.stream.GetLastMsgForSubject(ctx, AllSubject(node, sid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog: last line of %s from %s in %s: %w", sid, node, AllStream, err)
	}
	n, _ := strconv.ParseUint(m.Header.Get(HdrSrcSeq), 10, 64)
	return n, nil
}

// Origin returns the node that published the header line of session sid
// (the machine the session was begun on), "" when PI_ALL holds none.
func (a *All) Origin(ctx context.Context, sid string) (string, error) {
	subj := AllPrefix + ".*." + EncodeSID(sid)
	seq := uint64(1)
	// The header is a session's first line; a few steps past other
	// events (a second node's lines stored first) are plenty.
	for range 64 {
		m, err := a.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("eventlog: read %s: %w", subj, err)
		}
		if m.Header.Get(HdrType) == "session" && m.Header.Get(HdrOp) == "" {
			node, _, err := ParseSubject(m.Subject)
			return node, err
		}
		seq = m.Sequence + 1
	}
	return "", nil
}

// keyFloor returns the highest key message handle that PI_ALL's erase
// events of session sid name (HdrKeyFloor), 0 when none does. An erase
// keeps its event and deletes the lines before it, so the session's
// first messages are its erase events: the scan stops at the first that
// is not one. Those at or below sequence after were copied from a hub
// whose store was replaced since, whose PI_KEYS numbered its messages
// otherwise: they name no floor.
func (a *All) keyFloor(ctx context.Context, sid string, after uint64) (uint64, error) {
	subj := AllPrefix + ".*." + EncodeSID(sid)
	var floor uint64
	for seq := uint64(1); ; {
		m, err := a.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return floor, nil
		}
		if err != nil {
			return 0, fmt.Errorf("eventlog: read %s: %w", subj, err)
		}
		if m.Header.Get(HdrOp) != OpErase {
			return floor, nil
		}
		if h, err := strconv.ParseUint(m.Header.Get(HdrKeyFloor), 10, 64); err == nil && m.Sequence > after {
			floor = max(floor, h)
		}
		seq = m.Sequence + 1
	}
}
