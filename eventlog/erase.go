package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/seal"
)

// EraseType is the Pi-Type of an erase event.
const EraseType = "erase"

// EraseLine is the control event that asks every machine to erase a
// session, built like the tailer's tombstones: its payload names the
// operation, a file of the session (relative to the sessions root) and the
// time, so no two are alike. It holds nothing of the session's lines.
func EraseLine(file string, now time.Time) Line {
	raw, _ := json.Marshal(map[string]any{"op": OpErase, "file": file, "time": now.UTC().Format(time.RFC3339Nano)})
	return Line{Raw: raw, Sha: sha256.Sum256(raw), Type: EraseType, File: file, Op: OpErase}
}

// Erase deletes from s every message on the subjects matching filter
// (wildcards allowed) whose sequence is below before (0: every one), and
// returns how many it deleted. Erase events stay: they hold nothing of the
// session, and a machine that comes late (or reads the hub afresh) must
// still learn of the erase. Each delete is a secure one: nats-server
// overwrites the message in its block file with random bytes, so no copy
// of the line stays on disk (a purge would leave the bytes in the block
// until a compaction that may never come). That costs a rewrite of the
// message's block per message, about 30 ms with 8 MiB blocks on a laptop
// disk: erasing is rare and must be thorough.
func Erase(ctx context.Context, s jetstream.Stream, filter string, before uint64) (int, error) {
	return eraseEach(ctx, s, filter, before, nil)
}

// eraseEach is Erase, calling deleted (if not nil) with the count so far
// after each message it deletes.
func eraseEach(ctx context.Context, s jetstream.Stream, filter string, before uint64, deleted func(n int)) (int, error) {
	if info := s.CachedInfo(); info != nil && info.Config.DenyDelete {
		return 0, fmt.Errorf("eventlog: erase %s: %w", info.Config.Name, ErrDeleteDenied)
	}
	n := 0
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("eventlog: erase %s: find %s: %w", s.CachedInfo().Config.Name, filter, err)
		}
		if before > 0 && m.Sequence >= before {
			return n, nil
		}
		if m.Header.Get(HdrOp) == OpErase {
			seq = m.Sequence + 1
			continue // holds no line, and tells late machines to erase too
		}
		if err := s.SecureDeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, fmt.Errorf("eventlog: erase %s seq %d: %w", s.CachedInfo().Config.Name, m.Sequence, err)
		}
		n++
		if deleted != nil {
			deleted(n)
		}
		seq = m.Sequence + 1
	}
}

// ErrDeleteDenied: the stream was made before erase existed and not
// upgraded yet (UpgradeStream).
var ErrDeleteDenied = errors.New("the stream denies deleting messages (made by an older pisyncd; upgrade it first)")

// EraseBounds limit an erase to the messages below these sequences (0: no
// limit): on a machine that applies another's erase event, what a stream
// holds after the event is a new session and stays.
type EraseBounds struct {
	Local uint64 // PI_LOCAL
	All   uint64 // PI_ALL
}

// Erased counts the messages an erase deleted.
type Erased struct {
	Local int `json:"local"` // this node's own lines, in PI_LOCAL
	All   int `json:"all"`   // every node's lines, in PI_ALL
}

// EraseSession erases a session from this machine's streams: the lines
// this node published (PI_LOCAL, pi.evt.<node>.<sid>) and its copy of
// every node's lines (PI_ALL, pi.all.*.<sid>, when the stream exists).
// Both the erase a user asks for here and one applied for another machine
// go through it.
func EraseSession(ctx context.Context, js jetstream.JetStream, node, sid string, b EraseBounds) (Erased, error) {
	return EraseSessionEach(ctx, js, node, sid, b, nil)
}

// EraseSessionEach is EraseSession, calling deleted (if not nil) with the
// count so far, both streams together, after each message it deletes: a
// long session's erase takes minutes (a secure delete rewrites the
// message's block), and its caller says how far it is.
func EraseSessionEach(ctx context.Context, js jetstream.JetStream, node, sid string, b EraseBounds, deleted func(n int)) (Erased, error) {
	var out Erased
	local, err := js.Stream(ctx, LocalStream)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, fmt.Errorf("eventlog: erase: %s: %w", LocalStream, err)
	}
	if local != nil {
		if out.Local, err = eraseEach(ctx, local, LocalSubject(node, sid), b.Local, deleted); err != nil {
			return out, err
		}
	}
	all, err := js.Stream(ctx, AllStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return out, nil // no hub was ever configured here
	}
	if err != nil {
		return out, fmt.Errorf("eventlog: erase: %s: %w", AllStream, err)
	}
	var more func(int)
	if deleted != nil {
		more = func(n int) { deleted(out.Local + n) }
	}
	out.All, err = eraseEach(ctx, all, SessionFilter(sid), b.All, more)
	return out, err
}

// PublishErase publishes ev, an EraseLine, on this node's subject of
// session sid, after whatever the subject still holds. It returns the
// event's PI_LOCAL sequence.
func (l *Local) PublishErase(ctx context.Context, sid string, ev Line) (uint64, error) {
	last, _, err := LastSeq(ctx, l.stream, l.Subject(sid))
	if err != nil {
		return 0, err
	}
	seq, _, err := l.Publish(ctx, sid, last, []Line{ev})
	if err != nil {
		return 0, fmt.Errorf("eventlog: publish the erase of %s: %w", sid, err)
	}
	return seq, nil
}

// AllPosition is where the downloader stands in PI_ALL: the stream's last
// sequence, and the hub sequence of the message there (0 when PI_ALL is
// empty or that message is gone).
type AllPosition struct {
	Seq, HubSeq uint64
}

// LastPosition reads PI_ALL's AllPosition.
func (a *All) LastPosition(ctx context.Context) (AllPosition, error) {
	info, err := a.stream.Info(ctx)
	if err != nil {
		return AllPosition{}, fmt.Errorf("eventlog: %s: %w", AllStream, err)
	}
	pos := AllPosition{Seq: info.State.LastSeq}
	if pos.Seq == 0 {
		return pos, nil
	}
	m, err := a.stream.GetMsg(ctx, pos.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return pos, nil
	}
	if err != nil {
		return pos, fmt.Errorf("eventlog: last message of %s: %w", AllStream, err)
	}
	pos.HubSeq, _ = strconv.ParseUint(m.Header.Get(HdrHubSeq), 10, 64)
	return pos, nil
}

// KeepPosition keeps the downloader's place after an erase here: the
// downloader resumes after the hub sequence of PI_ALL's last message, so
// when the erase removed that message (the erased session was the last
// copied, as it often is), a restart would resume after an earlier one
// and copy the erased lines from the hub again, until the erase event
// came back and took them once more. So a copy of the session's erase
// event (ev, published on this node's subject) takes the removed
// message's place in PI_ALL, with its Pi-Hub-Seq and without a
// Pi-Src-Seq, by which the replicator tells it from the event the hub
// sends back. pos is PI_ALL's position before the erase. If the downloader
// has stored anything since, that holds its place and nothing is written.
func (a *All) KeepPosition(ctx context.Context, pos AllPosition, node, sid string, ev Line) error {
	if pos.HubSeq == 0 {
		return nil
	}
	if _, err := a.stream.GetMsg(ctx, pos.Seq); err == nil {
		return nil // still there
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("eventlog: %s position: %w", AllStream, err)
	}
	m := nats.NewMsg(AllSubject(node, sid))
	m.Data = ev.Raw
	m.Header.Set(HdrType, HeaderValue(ev.Type))
	m.Header.Set(HdrSha, hex.EncodeToString(ev.Sha[:]))
	m.Header.Set(HdrFile, ev.File)
	m.Header.Set(HdrOp, ev.Op)
	m.Header.Set(HdrHubSeq, strconv.FormatUint(pos.HubSeq, 10))
	_, err := a.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(pos.Seq))
	if IsWrongLastSequence(err) {
		return nil // the downloader stored more: its place moved on
	}
	if err != nil {
		return fmt.Errorf("eventlog: %s position: %w", AllStream, err)
	}
	return nil
}

// ErrNoEraseEvent: the hub holds no erase event of the session, so no
// machine has been asked to erase it.
var ErrNoEraseEvent = errors.New("eventlog: no erase event of this session on the hub")

// HubErased is what EraseHub did.
type HubErased struct {
	Found    bool   `json:"found"` // PI_HUB held messages of the session
	Messages int    `json:"messagesErased"`
	Before   uint64 `json:"before"` // the erase event's sequence (0: forced, everything)
	// KeySubjects counts the session's key messages on PI_KEYS
	// tombstoned: those no message left on PI_HUB names.
	KeySubjects int `json:"keyMessagesErased"`
}

// EraseHub erases a session from the hub's PI_HUB (js is the hub's
// JetStream in one team's account): every node's lines of it stored before
// its last erase event. The erase events stay, so a machine that was away
// still learns of the erase when it comes back; lines after the last one
// are a new session. Without an erase event it refuses with
// ErrNoEraseEvent, unless force, which erases every line of the session.
// A PI_HUB without a message of the session (another team's) is no error.
func EraseHub(ctx context.Context, js jetstream.JetStream, sid string, force bool) (HubErased, error) {
	s, err := js.Stream(ctx, HubStream)
	if err != nil {
		return HubErased{}, fmt.Errorf("eventlog: hub erase: %s: %w", HubStream, err)
	}
	filter := UpPrefix + ".*." + EncodeSID(sid)
	var out HubErased
	// An erase event is taken from a node that published lines of the
	// session before it, as admission takes it on the workstations (a
	// node that only held a copy has no say over the session), or when no
	// line is left before it (an erase already carried out here: nothing
	// before it to erase). Before, a copy's erase, which every workstation
	// refused, erased the author's session from the hub.
	wrote, lineBefore := map[string]bool{}, false
	var left []string
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("eventlog: hub erase: find %s: %w", filter, err)
		}
		out.Found = true
		node := strings.Split(m.Subject, ".")[2] // pi.up.<node>.<session>
		switch m.Header.Get(HdrOp) {
		case OpErase:
			if wrote[node] || !lineBefore {
				out.Before = m.Sequence
			} else if !slices.Contains(left, node) {
				left = append(left, node)
			}
		case "":
			wrote[node], lineBefore = true, true
		}
		seq = m.Sequence + 1
	}
	if !out.Found {
		return out, nil
	}
	if out.Before == 0 && !force {
		if len(left) > 0 {
			return out, fmt.Errorf("%w from a node that wrote it (its erase events are from %s, which only held a copy)", ErrNoEraseEvent, strings.Join(left, ", "))
		}
		return out, ErrNoEraseEvent
	}
	if out.Messages, err = Erase(ctx, s, filter, out.Before); err != nil {
		return out, err
	}
	out.KeySubjects, err = eraseHubKeys(ctx, js, s, filter)
	return out, err
}

// EraseHubNode deletes every line a node published on the hub's PI_HUB
// (js in one team's account), one secure delete each: how an operator
// frees the team's share of the hub after a node of the team filled it
// (its lines stay on the hub even where admission rejected them, and a
// full share refuses every node's next line). The node's erase events
// stay, as EraseHub keeps them, and so do its key messages on PI_KEYS
// (81 bytes each, in a stream of its own). Remove the node from the hub
// first, or it fills the share again. A PI_HUB without a message of the
// node is no error (Found false). A node's lines may be many, and each
// delete rewrites its block: progress, if not nil, is called with the count
// so far after each one.
func EraseHubNode(ctx context.Context, js jetstream.JetStream, node string, progress func(erased int)) (HubErased, error) {
	if !ValidNodeID(node) {
		return HubErased{}, fmt.Errorf("eventlog: hub erase: %q is not a node name", node)
	}
	s, err := js.Stream(ctx, HubStream)
	if err != nil {
		return HubErased{}, fmt.Errorf("eventlog: hub erase: %s: %w", HubStream, err)
	}
	filter := UpPrefix + "." + node + ".>"
	var out HubErased
	switch _, err := s.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(filter)); {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return out, nil
	case err != nil:
		return out, fmt.Errorf("eventlog: hub erase: find %s: %w", filter, err)
	}
	out.Found = true
	out.Messages, err = eraseEach(ctx, s, filter, 0, progress)
	return out, err
}

// eraseHubKeys tombstones, on PI_KEYS, each key message of the session
// (filter: its PI_HUB subjects) that no message left on PI_HUB names: the
// keys of a node that has not followed the erase yet (away), which would
// otherwise stay until it does. An empty message on a key subject
// replaces its key message (one message per subject); PI_KEYS allows no
// purge, so tombstones are how the operator erases too. A key message
// still named (an erase event's, or one of lines after the last erase
// event) stays. A hub without PI_KEYS has nothing to do.
func eraseHubKeys(ctx context.Context, js jetstream.JetStream, hub jetstream.Stream, filter string) (int, error) {
	keys, err := js.Stream(ctx, KeysStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("eventlog: hub erase: %s: %w", KeysStream, err)
	}
	named := map[uint64]bool{}
	for seq := uint64(1); ; {
		m, err := hub.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("eventlog: hub erase: find %s: %w", filter, err)
		}
		if h, ok := seal.Handle(m.Data); ok {
			named[h] = true
		}
		seq = m.Sequence + 1
	}
	tok := filter[strings.LastIndexByte(filter, '.')+1:]
	info, err := keys.Info(ctx, jetstream.WithSubjectFilter(KeyPrefix+".*."+tok+".>"))
	if err != nil {
		return 0, fmt.Errorf("eventlog: hub erase: %s: %w", KeysStream, err)
	}
	n := 0
	for subj := range info.State.Subjects {
		m, err := keys.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("eventlog: hub erase: %s: %w", subj, err)
		}
		if named[m.Sequence] || len(m.Data) == 0 {
			continue
		}
		if _, err := js.Publish(ctx, subj, nil, jetstream.WithExpectStream(KeysStream)); err != nil {
			return n, fmt.Errorf("eventlog: hub erase: tombstone %s: %w", subj, err)
		}
		n++
	}
	return n, nil
}
