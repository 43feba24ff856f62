package eventlog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/keyring"
	"github.com/pisyncd/pisyncd/seal"
)

// HdrSeal marks a sealed message on PI_HUB (end-to-end encryption): its
// payload is a seal envelope, its subject names the session by its keyed
// hash (seal.Token), and the only other headers are those the hub needs:
// Pi-Src-Seq (exactly-once), Pi-Chunk (framing) and, on an erase event,
// Pi-Op (so the hub operator's erase keeps it). Its value is the envelope
// format's version: "1" (the wrapped data key in every envelope, history)
// or "2" (a handle naming the key message on PI_KEYS).
const HdrSeal = "Pi-Seal"

// Crypt is this node's end-to-end encryption: the team keyring, read
// from its file and read again when the file changes (key import, key
// rotate on this machine), a sealer for the forwarder and an opener for
// the downloader. Safe for concurrent use.
type Crypt struct {
	path   string
	node   string
	always bool // on: fail closed without a key; else (auto) plain without one
	off    bool // off: sealed lines are opened only with a keyring here (NoSealing)

	mu      sync.Mutex
	ring    *keyring.Ring
	loadErr error
	stamp   string // the file's size and mtime when read
	checked time.Time
	sealer  *seal.Sealer
	opener  *seal.Opener
	toks    tokens // of the opener's keyring

	waitFwd, waitDl string // why forwarding / copying waits, "" when it does not
	teamChanged     string // the last change of team under this process (refreshLocked)
	logger          *slog.Logger

	// last is what Status returned the last time it could take mu: while
	// seal holds mu across a request to the hub (a key message published,
	// up to the publish timeout), status answers from it.
	last atomic.Pointer[CryptStatus]

	// erasures are the sessions erased here for another node, by token:
	// the key messages this node has still to destroy on the hub, and
	// done ones, so that a replayed erase event is known (cryptstate.go).
	// state keeps them over restarts when set (UseState).
	erasures map[string]*erasure
	erasedC  chan struct{} // signalled when erasures grows
	state    jetstream.KeyValue

	// sealedFor is the team this node has sealed its lines for (its
	// record in state, sealedKey), "" before it ever did: a keyring file
	// gone then is no machine that does not encrypt (cryptstate.go).
	sealedFor string

	// hubSealed is "" until the hub shows this node, without a keyring
	// under auto, that its team encrypts (crypthub.go); hubLooked is
	// when it last asked.
	hubSealed string
	hubLooked time.Time
}

// NewCrypt reads the keyring at path for node. A missing keyring is no
// error: the downloader waits at the first sealed line until a key
// appears, and the forwarder forwards nothing and says why when always
// (PISYNC_ENCRYPT=on: fail closed), or forwards lines as they are (auto;
// but not with a keyring file there that cannot be read: subject).
func NewCrypt(path, node string, always bool) *Crypt {
	c := &Crypt{path: path, node: node, always: always, erasures: map[string]*erasure{}, erasedC: make(chan struct{}, 1), logger: slog.New(slog.DiscardHandler)}
	c.refreshLocked(time.Time{})
	c.Status()
	return c
}

// SetLogger sets where a change of the keyring's team is said. Call it
// before the Crypt is used.
func (c *Crypt) SetLogger(l *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logger = l
}

// NoSealing says that encryption is off here (PISYNC_ENCRYPT=off): this
// machine seals nothing, and a sealed line from another node is opened
// when a keyring is here, as under auto, but refused (RejectSealed) when
// none is, where auto waits for one. In a team that does not encrypt, a
// teammate sealing a line under a key of its own stalled every copy to
// such a machine, which waited for a key that would never come.
func (c *Crypt) NoSealing() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
}

// ErrNoTeamKey: encryption is on and this machine has no team key, so
// nothing is forwarded.
var ErrNoTeamKey = errors.New("encryption is on and there is no team key here: nothing is forwarded to the hub (pisyncd key import of the team's key; key init only to begin a new team)")

// refreshLocked reads the keyring again when its file changed, at most
// once a second (now zero: at once).
func (c *Crypt) refreshLocked(now time.Time) {
	if !now.IsZero() && now.Sub(c.checked) < time.Second {
		return
	}
	c.checked = now
	fi, err := os.Stat(c.path)
	stamp := ""
	if err == nil {
		stamp = fmt.Sprintf("%d/%d/%v", fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	if stamp == c.stamp && c.stamp != "" {
		return
	}
	c.stamp = stamp
	r, err := keyring.Load(c.path)
	if err == nil && c.ring != nil && r.Team != c.ring.Team {
		// Another team's keyring in the file's place: the right one, for
		// a machine set up with a wrong one, or a wrong one (key init
		// after the file was moved away), which seals this node's lines
		// for no one of its team. Taken either way, and said loudly.
		c.teamSwitchLocked(c.ring.Team, r.Team, "now")
	}
	c.loadErr = err
	if err != nil {
		return // keep a keyring already read: a broken rewrite must not stop sealing
	}
	c.ring = r
	c.startTeamLocked()
	if c.sealer == nil {
		c.sealer, c.opener = seal.NewSealer(r, c.node), seal.NewOpener(r)
	} else {
		c.sealer.SetRing(r)
		c.opener.SetRing(r)
	}
}

// teamSwitchLocked says, in the log and in status (teamChanged), that the
// keyring file holds team to's keys where this node sealed for team from.
func (c *Crypt) teamSwitchLocked(from, to, when string) {
	c.teamChanged = fmt.Sprintf("from team %s to team %s at %s: lines are sealed for team %s from then on, which holders of team %s's keys cannot open", from, to, time.Now().UTC().Format(time.RFC3339), to, from)
	c.logger.Warn("the team key file "+when+" holds another team's keyring: "+c.teamChanged,
		"hint", "if that is a mistake (key init after the file was moved away), put team "+from+"'s key file back (pisyncd key import)")
}

// startTeamLocked says teamSwitchLocked's warning at a start whose
// keyring is another team's than the one this node last sealed for (the
// file replaced while the daemon was stopped), once both are read, in
// either order (refreshLocked, UseState); once said, or once a running
// daemon said a change, not again.
func (c *Crypt) startTeamLocked() {
	if c.ring != nil && c.sealedFor != "" && c.ring.Team != c.sealedFor && c.teamChanged == "" {
		c.teamSwitchLocked(c.sealedFor, c.ring.Team, "since this node last sealed")
	}
}

// brokenKeyringLocked reports whether a keyring file is there that could
// not be read (not merely none), or is gone from a machine that sealed
// its lines before: either says this machine's team encrypts.
func (c *Crypt) brokenKeyringLocked() bool {
	return c.loadErr != nil && (!errors.Is(c.loadErr, keyring.ErrNoKeyring) || c.sealedFor != "" || c.ring != nil)
}

// keyErrorLocked is what status says of a keyring that is broken.
func (c *Crypt) keyErrorLocked() string {
	if errors.Is(c.loadErr, keyring.ErrNoKeyring) {
		team := c.sealedFor
		if c.ring != nil {
			team = c.ring.Team
		}
		return fmt.Sprintf("the team key file %s is gone, and this machine seals its lines for team %s: put it back, or pisyncd key import the team's key (PISYNC_ENCRYPT=off to send in clear on purpose)", c.path, team)
	}
	return c.loadErr.Error()
}

// CryptStatus is what status shows of the encryption.
type CryptStatus struct {
	Team       string `json:"team,omitempty"`
	CurrentKey string `json:"currentKey,omitempty"`
	Keys       int    `json:"keys"`
	KeyError   string `json:"keyError,omitempty"`
	// ForwardWaiting and CopyWaiting say why forwarding to or copying
	// from the hub is held back for a key.
	ForwardWaiting string `json:"forwardWaiting,omitempty"`
	CopyWaiting    string `json:"copyWaiting,omitempty"`
	// TeamChanged says when the keyring file took another team's keys
	// under the running daemon, and what that means.
	TeamChanged string `json:"teamChanged,omitempty"`
	// SealedFor is the team this node has sealed its lines for, "" if it
	// never did: without a keyring, auto then fails closed.
	SealedFor string `json:"sealedFor,omitempty"`
	// HubSealed says how, under auto without a keyring, this node knows
	// from the hub that its team encrypts (lookAtHub): auto then fails
	// closed.
	HubSealed string `json:"hubSealed,omitempty"`
}

// Status returns the encryption's state, never waiting for a seal that
// publishes a key message to the hub: then it is the state as that seal
// began.
func (c *Crypt) Status() CryptStatus {
	if !c.mu.TryLock() {
		if s := c.last.Load(); s != nil {
			return *s
		}
		c.mu.Lock() // only before the first Status, which NewCrypt makes
	}
	defer c.mu.Unlock()
	c.refreshLocked(time.Now())
	return c.statusLocked()
}

// statusLocked computes the status and keeps it for Status to answer
// with while mu is held.
func (c *Crypt) statusLocked() CryptStatus {
	s := CryptStatus{ForwardWaiting: c.waitFwd, CopyWaiting: c.waitDl, TeamChanged: c.teamChanged, SealedFor: c.sealedFor, HubSealed: c.hubSealed}
	if c.ring != nil {
		s.Team, s.CurrentKey, s.Keys = c.ring.Team, c.ring.Current, len(c.ring.Keys)
	}
	if c.brokenKeyringLocked() {
		s.KeyError = c.keyErrorLocked()
	}
	if p := c.last.Load(); p == nil || *p != s {
		kept := s // allocated only when it changed: open calls this per line
		c.last.Store(&kept)
	}
	return s
}

// Forget destroys this machine's copies of a session's data keys (an
// erase): the sealer makes a new one for anything sealed after, and the
// opener unwraps again only what is still there to unwrap.
func (c *Crypt) Forget(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sealer != nil {
		c.sealer.Forget(sid)
		c.opener.Forget(sid)
	}
}

// NewHub forgets what this machine holds of the hub's key messages, when
// the hub's store was replaced (hubid.go): the new PI_KEYS numbers its
// messages afresh, so a handle names another key message there. The
// sealer draws new data keys, whose key messages go to the new hub; the
// opener fetches key messages again rather than open a line with a key
// unwrapped from the old hub's message of the same number.
func (c *Crypt) NewHub() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sealer != nil {
		c.sealer.ForgetAll()
		c.opener = seal.NewOpener(c.opener.Ring())
	}
}

// EraseKeys is Forget for a session erased here on another node's erase
// event, seq its PI_ALL sequence: it also has this node's key messages of
// the session destroyed on the hub (the forwarder publishes an empty
// tombstone on each of its own key subjects of the session, which
// PI_KEYS's limit of one message per subject makes replace the key
// message), so that what this node sealed of it can no longer be opened
// by anyone, wherever the ciphertext stays. Key messages this node
// publishes after the call stay; the same erase event again (a replay
// after a restart) changes nothing. An error (the state bucket did not
// take it) means call again.
func (c *Crypt) EraseKeys(sid string, seq uint64) error {
	c.Forget(sid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ring == nil {
		return nil // nothing was sealed here without a keyring
	}
	tok := seal.Token(c.ring, sid)
	prev := c.erasures[tok]
	if prev != nil && prev.Seq >= seq {
		return nil // this erase, replayed, or a later one
	}
	c.erasures[tok] = &erasure{Seq: seq}
	if err := c.saveErasureLocked(tok); err != nil {
		c.erasures[tok] = prev
		if prev == nil {
			delete(c.erasures, tok)
		}
		return err
	}
	c.signalErasureLocked()
	return nil
}

// keyErasures returns the tokens of the sessions whose key messages are
// to be destroyed, and a channel signalled when there are more.
func (c *Crypt) keyErasures() ([]string, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var toks []string
	for tok, e := range c.erasures {
		if !e.Done {
			toks = append(toks, tok)
		}
	}
	return toks, c.erasedC
}

// eraseKeys tombstones this node's key subjects of the session whose
// token is tok, but for the key messages published since its erase,
// under the lock that sealing holds, so that a tombstone never lands
// after a key message this node sealed later.
func (c *Crypt) eraseKeys(tok string, kh KeyHub) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.erasures[tok]
	if e == nil || e.Done {
		return nil // an erase event sealed since tombstoned them itself
	}
	if err := tombstone(KeySubject(c.node, tok), e.Keep, kh); err != nil {
		return err
	}
	return c.erasedLocked(tok)
}

// tombstone publishes an empty message on every subject of PI_KEYS under
// prefix (a node's key subjects of a session) but those of the key ids in
// keep: PI_KEYS keeps one message per subject, so each key message there
// is discarded. The subjects are listed by a stream info with a subject
// filter, which shows a node only subject names
// (pi.key.<node>.<token>.<kid>), no content.
func tombstone(prefix string, keep []string, kh KeyHub) error {
	subjs, err := kh.Subjects(prefix + ".>")
	if err != nil {
		return err
	}
	for _, subj := range subjs {
		if slices.Contains(keep, strings.TrimPrefix(subj, prefix+".")) {
			continue
		}
		if _, err := kh.Publish(subj, nil); err != nil {
			return err
		}
	}
	return nil
}

// KeyHub is what sealing needs of the hub's PI_KEYS: Publish puts a key
// message (or, empty, a tombstone) on subj and returns its sequence;
// Subjects lists the subjects matching filter that hold a message; Count
// is the number of messages the stream holds.
type KeyHub struct {
	Publish  func(subj string, body []byte) (uint64, error)
	Subjects func(filter string) ([]string, error)
	Count    func() (uint64, error)
}

// KeyID names a key message's subject under its node's key subject of a
// session: a hash of the key message, so each data key has a subject of
// its own (PI_KEYS keeps one message per subject) and a message published
// again after a lost acknowledgement lands where it did.
func KeyID(msg []byte) string {
	h := sha256.Sum256(msg)
	return hex.EncodeToString(h[:8])
}

// inner is what a sealed line carries of the headers a plain one shows
// the hub.
type inner struct {
	SID    string `json:"sid"`
	ID     string `json:"id,omitempty"`
	Parent string `json:"parent,omitempty"`
	Type   string `json:"type,omitempty"`
	File   string `json:"file,omitempty"`
	Off    int64  `json:"off,omitempty"`
	Op     string `json:"op,omitempty"`
	Sha    string `json:"sha"`
}

// noKeyLocked records and returns why nothing is forwarded.
func (c *Crypt) noKeyLocked() error {
	c.waitFwd = ErrNoTeamKey.Error()
	switch {
	case c.brokenKeyringLocked():
		c.waitFwd = c.keyErrorLocked()
	case !c.always && c.hubSealed != "":
		err := fmt.Errorf("%w"+teamEncryptsWait, ErrTeamEncrypts, c.hubSealed)
		c.waitFwd = err.Error()
		c.statusLocked()
		return err
	}
	c.statusLocked()
	return fmt.Errorf("%w: %v", ErrNoTeamKey, c.loadErr)
}

// subject is the hub subject of this node's session sid and, when its
// lines are sealed, the session's token ("" when they are not).
func (c *Crypt) subject(sid string) (up, tok string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshLocked(time.Now())
	switch {
	case c.ring != nil:
		if err := c.recordSealingLocked(); err != nil {
			return "", "", err
		}
		tok = seal.Token(c.ring, sid)
		return UpPrefix + "." + c.node + "." + tok, tok, nil
	case c.always, c.brokenKeyringLocked(), c.hubSealed != "":
		// Under auto too, a keyring file that is there but cannot be
		// read (its mode, a damaged file), or that is gone from a
		// machine that sealed before (moved, a state dir restored
		// without it, another PISYNC_KEY_FILE), fails closed: this
		// machine's team encrypts, and a line sent in clear meanwhile
		// would stay on the hub in clear, and be refused by teammates
		// that require sealing (a hole in their copy for good). So
		// does a machine whose hub shows that its team encrypts
		// (lookAtHub).
		return "", "", c.noKeyLocked()
	}
	return UpSubject(c.node, sid), "", nil
}

// seal turns a line of session sid into its sealed form for the hub and
// returns its hub subject; a new data key's key message is published on
// PI_KEYS first, on a subject of its own. The erase event of a session is
// sealed under a new data key, which the session's earlier lines never
// used, after this node's earlier key messages of the session are
// tombstoned: they are gone from the hub, and the erase event itself
// still opens (other nodes must read it to erase).
func (c *Crypt) seal(sid string, l *Line, kh KeyHub) (string, Line, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshLocked(time.Now())
	if c.ring == nil {
		return "", Line{}, c.noKeyLocked()
	}
	c.waitFwd = ""
	c.statusLocked() // what Status shows while the hub requests below wait
	erase := l.Op == OpErase
	if erase {
		c.sealer.Forget(sid)
		defer c.sealer.Forget(sid)
		if err := tombstone(KeySubject(c.node, seal.Token(c.ring, sid)), nil, kh); err != nil {
			return "", Line{}, fmt.Errorf("erase %s's key messages: %w", sid, err)
		}
	}
	tok, envs, err := c.sealer.SealV2(sid, l.SrcSeq, innerPlain(sid, l), MaxChunk, func(tok string, msg []byte) (uint64, error) {
		kid := KeyID(msg)
		seq, err := kh.Publish(KeySubject(c.node, tok)+"."+kid, msg)
		if err != nil || erase {
			return seq, err
		}
		return seq, c.keepKeyLocked(tok, kid)
	})
	if err != nil {
		return "", Line{}, err
	}
	if erase {
		if err := c.erasedLocked(tok); err != nil {
			return "", Line{}, err
		}
	}
	out := Line{SrcSeq: l.SrcSeq, sealed: envs}
	if erase {
		out.Op = OpErase
	}
	return UpPrefix + "." + c.node + "." + tok, out, nil
}

// innerPlain is what an envelope seals of line l of session sid: its
// headers (the inner form), then its bytes.
func innerPlain(sid string, l *Line) []byte {
	in := inner{SID: sid, ID: l.ID, Parent: l.ParentID, Type: l.Type, File: l.File, Off: l.Off, Op: l.Op}
	if l.Sha != [32]byte{} {
		in.Sha = hex.EncodeToString(l.Sha[:])
	}
	hdr, _ := json.Marshal(in)
	plain := binary.AppendUvarint(make([]byte, 0, len(hdr)+len(l.Raw)+8), uint64(len(hdr)))
	return append(append(plain, hdr...), l.Raw...)
}

// errUnsealed classes an envelope that cannot be opened for a reason that
// is not waiting for a key.
type errUnsealed struct {
	reason string
	err    error
}

func (e *errUnsealed) Error() string { return e.err.Error() }
func (e *errUnsealed) Unwrap() error { return e.err }

// Reasons a sealed line is passed over.
const (
	RejectUndecryptable = "undecryptable" // tampered, reordered, truncated, malformed
	RejectMoved         = "moved"         // sealed for another node, session or position
	RejectErased        = "erased"        // its key message is gone from the hub: erased
	RejectReplayed      = "replayed"      // at or before a position of its origin's session admitted already
	RejectUnsealed      = "unsealed"      // in clear, and encryption is on here (PISYNC_ENCRYPT=on)
	RejectSealed        = "sealed"        // sealed, and encryption is off here with no keyring (PISYNC_ENCRYPT=off)
	RejectHeldLimit     = "held-limit"    // sealed with a key not here, and its node has maxHeldPerNode sessions held already
)

// needKey returns the handle of the key message an error of open asks
// for, if it does.
func needKey(err error) (uint64, bool) {
	var nk *seal.NeedKeyError
	if errors.As(err, &nk) {
		return nk.Handle, true
	}
	return 0, false
}

// addKey gives the opener the key message of handle h, fetched from the
// hub on node's key subject of tok. Errors as open's.
func (c *Crypt) addKey(node, tok string, h uint64, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.statusLocked() // waitDl may change
	if c.opener == nil {
		c.opener = seal.NewOpener(nil)
	}
	err := c.opener.AddKey(node, tok, h, body)
	switch {
	case errors.Is(err, seal.ErrNoKey):
		c.waitDl = fmt.Sprintf("%v: lines from %s are sealed with a team key this machine does not have; nothing after them is copied until it has it (pisyncd key import)", err, node)
		return err
	case errors.Is(err, seal.ErrMoved):
		return &errUnsealed{RejectMoved, err}
	case err != nil:
		return &errUnsealed{RejectUndecryptable, err}
	}
	return nil
}

// check reports whether env is chunk i of n of a line this node sealed on
// its hub subject of token tok at PI_LOCAL position srcSeq (the forwarder's
// check of the hub's position, forwardcheck.go); errors as
// seal.Opener.Check's.
func (c *Crypt) check(tok string, srcSeq uint64, env []byte, i, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshLocked(time.Now())
	if c.opener == nil {
		return c.noKeyLocked()
	}
	return c.opener.Check(c.node, tok, srcSeq, env, i, n)
}

// learn gives the opener key message h of this node's session token tok,
// for check.
func (c *Crypt) learn(tok string, h uint64, body []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opener == nil {
		return c.noKeyLocked()
	}
	return c.opener.AddKey(c.node, tok, h, body)
}

// keyringStamp returns the keyring file's size, time and mode, read again
// at most once a second: it changes when a key is imported or rotated in.
func (c *Crypt) keyringStamp() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshLocked(time.Now())
	return c.stamp
}

// notWaiting records that copying does not wait for a key: the lines
// that would have made it wait are held aside (park.go).
func (c *Crypt) notWaiting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waitDl = ""
	c.statusLocked()
}

// keyWait records that copying waits for key message h of node.
func (c *Crypt) keyWait(node string, h uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.statusLocked() // waitDl may change
	c.waitDl = fmt.Sprintf("a line from %s names key message %d, which the hub's %s does not hold yet; nothing after it is copied until it does", node, h, KeysStream)
	return fmt.Errorf("key message %d of %s not on the hub yet: %w", h, node, seal.ErrNoKey)
}

// open opens the envelopes of one line that node sealed on the hub
// subject token tok. An error wrapping seal.ErrNoKey means wait for a
// key; an *errUnsealed means pass the line over, as a line is when
// encryption is off here with no keyring (NoSealing).
func (c *Crypt) open(node, tok string, srcSeq uint64, envs [][]byte, maxLine int) (*Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.statusLocked() // waitDl may change
	now := time.Now()
	if c.off && c.ring == nil {
		// The keyring looked at again for every such line, not once a
		// second: a line that comes just after a key was imported is
		// opened, not refused.
		now = time.Time{}
	}
	c.refreshLocked(now)
	if c.off && c.ring == nil {
		return nil, &errUnsealed{RejectSealed, errors.New("a sealed line, and encryption is off here with no team key (PISYNC_ENCRYPT=off; pisyncd key import, then it is opened)")}
	}
	if c.opener == nil {
		c.opener = seal.NewOpener(nil)
	}
	plain, err := c.opener.Open(node, tok, srcSeq, envs, maxLine+64<<10)
	switch {
	case errors.Is(err, seal.ErrNeedKey):
		return nil, err
	case errors.Is(err, seal.ErrNoKey):
		c.waitDl = fmt.Sprintf("%v: lines from %s are sealed with a team key this machine does not have; nothing after them is copied until it has it (pisyncd key import)", err, node)
		return nil, err
	case errors.Is(err, seal.ErrMoved):
		return nil, &errUnsealed{RejectMoved, err}
	case err != nil:
		return nil, &errUnsealed{RejectUndecryptable, err}
	}
	c.waitDl = ""
	n, k := binary.Uvarint(plain)
	var in inner
	if k <= 0 || n > uint64(len(plain)-k) || decodeInner(plain[k:k+int(n)], &in) != nil {
		return nil, &errUnsealed{RejectUndecryptable, errors.New("sealed line: bad inner headers")}
	}
	if c.toks.get(c.opener.Ring(), in.SID) != tok {
		return nil, &errUnsealed{RejectMoved, fmt.Errorf("sealed line of session %q arrived on token %s", in.SID, tok)}
	}
	if err := CheckSID(in.SID); err != nil {
		return nil, &errUnsealed{RejectUndecryptable, err}
	}
	ev := &Event{
		Stream: HubStream, Subject: UpSubject(node, in.SID), Node: node, SID: in.SID,
		ID: in.ID, ParentID: in.Parent, Type: in.Type, File: in.File, Off: in.Off, Op: in.Op,
		SrcSeq: srcSeq, Raw: plain[k+int(n):],
	}
	if in.Op == "" || in.Sha != "" {
		if ev.Sha, err = ParseSha(in.Sha); err != nil {
			return nil, &errUnsealed{RejectUndecryptable, err}
		}
	}
	return ev, nil
}
