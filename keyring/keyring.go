// Package keyring owns the team keyring: the secret keys a team's
// workstations share and the hub never sees. It holds several team keys
// (one current, which seals new data; older ones still open what they
// sealed), a key for the keyed hash of session ids, and the team id. It
// reads and writes the keyring file (JSON, 0600, written atomically) and
// the export form a person copies between machines. No network, no NATS.
package keyring

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// KeySize is the size of every secret key (XChaCha20-Poly1305's).
const KeySize = 32

// FileName is the keyring's name in the state dir.
const FileName = "team-key.json"

// ErrNoKeyring: there is no keyring file (encryption cannot be on).
var ErrNoKeyring = errors.New("keyring: no team key here (pisyncd key init, or key import)")

// Key is one team key.
type Key struct {
	ID      string    `json:"id"` // KeyID of Secret
	Created time.Time `json:"created"`
	Secret  []byte    `json:"key"`
}

// Ring is a team's keyring.
type Ring struct {
	Version int    `json:"version"`
	Team    string `json:"team"`  // 16 hex digits, random, names the team in every AAD
	IDKey   []byte `json:"idKey"` // the keyed hash of session ids; never rotates
	Keys    []Key  `json:"keys"`  // oldest first
	Current string `json:"current"`
}

// KeyID names a team key without revealing it: a hash of the team and
// the key, 16 hex digits. Another team's key, or a mistyped one, has
// another id, so "no key with this id" is how a machine with the wrong key
// tells it has the wrong key.
func KeyID(team string, secret []byte) string {
	h := sha256.New()
	h.Write([]byte("pisyncd/key-id/v1\x00" + team + "\x00"))
	h.Write(secret)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("keyring: no randomness: " + err.Error()) // crypto/rand never fails on supported systems
	}
	return b
}

// New makes a keyring for a new team with one key.
func New(now time.Time) *Ring {
	r := &Ring{Version: 1, Team: hex.EncodeToString(random(8)), IDKey: random(KeySize)}
	r.add(random(KeySize), now)
	return r
}

func (r *Ring) add(secret []byte, created time.Time) Key {
	k := Key{ID: KeyID(r.Team, secret), Created: created.UTC().Truncate(time.Second), Secret: secret}
	r.Keys = append(r.Keys, k)
	r.Current = k.ID
	return k
}

// Rotate adds a new key and makes it current; the old ones stay, to open
// what they sealed.
func (r *Ring) Rotate(now time.Time) Key { return r.add(random(KeySize), now) }

// CurrentKey is the key that seals new data.
func (r *Ring) CurrentKey() Key {
	k, _ := r.Key(r.Current)
	return k
}

// Key finds a key by id.
func (r *Ring) Key(id string) (Key, bool) {
	for _, k := range r.Keys {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// MaxKeys is the most keys a keyring holds: its export counts them, and
// names the current one, in a byte each.
const MaxKeys = 255

// Check reports a keyring that cannot be used.
func (r *Ring) Check() error {
	if r.Version != 1 {
		return fmt.Errorf("keyring: version %d, this pisyncd knows 1", r.Version)
	}
	if b, err := hex.DecodeString(r.Team); err != nil || len(b) != 8 {
		return fmt.Errorf("keyring: bad team id %q", r.Team)
	}
	if len(r.IDKey) != KeySize {
		return errors.New("keyring: bad id key")
	}
	if len(r.Keys) == 0 {
		return errors.New("keyring: no keys")
	}
	if len(r.Keys) > MaxKeys {
		return fmt.Errorf("keyring: %d keys, more than the %d an export carries", len(r.Keys), MaxKeys)
	}
	for _, k := range r.Keys {
		if len(k.Secret) != KeySize || KeyID(r.Team, k.Secret) != k.ID {
			return fmt.Errorf("keyring: key %s is damaged", k.ID)
		}
	}
	if _, ok := r.Key(r.Current); !ok {
		return fmt.Errorf("keyring: current key %s is not in the ring", r.Current)
	}
	return nil
}

// Merge adds other's keys to r (the same team, from another machine) and
// picks the current key, now being this machine's clock. It reports
// whether r changed. The choice needs no clock when it can: other's
// current key, new here, is current when other holds r's current key
// too (other rotated after this machine's last: a revocation must win
// however the makers' clocks are set), and r's stays when other's is
// known here (an older block). Only two rotations made unaware of each
// other are ordered by their makers' clocks, the later winning, and a key
// dated ahead of now by more than clockSkew never wins so: a machine whose
// clock runs ahead would otherwise keep its key current on every machine
// that imported it, past the rotation meant to lock it out (a probe on
// 2026-12-06 found that).
func (r *Ring) Merge(other *Ring, now time.Time) (bool, error) {
	if other.Team != r.Team {
		// Not "remove the file": it may hold the only copy of keys that
		// this machine's sealed lines on the hub need (a newcomer probe
		// followed that advice and left its teammates waiting for good
		// on a key that no longer existed).
		return false, fmt.Errorf("keyring: that key is team %s's, this machine has team %s's; to switch teams, keep team %s's keys first (pisyncd key export > team-%s.key, 0600: the lines this machine sealed need them), then move %s away and import again", other.Team, r.Team, r.Team, r.Team, FileName)
	}
	var add []Key
	for _, k := range other.Keys {
		if _, ok := r.Key(k.ID); !ok {
			add = append(add, k)
		}
	}
	if n := len(r.Keys) + len(add); n > MaxKeys {
		return false, fmt.Errorf("keyring: the two keyrings hold %d keys together, more than the %d a keyring holds", n, MaxKeys)
	}
	cur, ours := other.CurrentKey(), r.CurrentKey()
	_, known := r.Key(cur.ID)
	_, theyHaveOurs := other.Key(ours.ID)
	r.Keys = append(r.Keys, add...)
	changed := len(add) > 0
	slices.SortStableFunc(r.Keys, func(a, b Key) int { return a.Created.Compare(b.Created) })
	take := false
	switch {
	case known:
	case theyHaveOurs:
		take = true
	default:
		// Times are kept to the second: a tie goes to the key imported.
		take = !dated(ours, now).After(dated(cur, now))
	}
	if take {
		r.Current, changed = cur.ID, true
	}
	return changed, nil
}

// clockSkew is how far ahead of this machine's clock a key's date may be
// and still order two rotations.
const clockSkew = 10 * time.Minute

// dated is k's date for ordering two rotations: the zero time when it is
// ahead of now by more than clockSkew.
func dated(k Key, now time.Time) time.Time {
	if k.Created.After(now.Add(clockSkew)) {
		return time.Time{}
	}
	return k.Created
}

// Path is the keyring file: file when set (PISYNC_KEY_FILE), else
// FileName in the state dir.
func Path(stateDir, file string) string {
	if file != "" {
		return file
	}
	return filepath.Join(stateDir, FileName)
}

// Load reads the keyring at path. It refuses a file that others may read:
// the key would not be secret.
func Load(path string) (*Ring, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s)", ErrNoKeyring, path)
	}
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if !fi.Mode().IsRegular() {
		// Before the mode: "chmod 600 it" of PISYNC_KEY_FILE=/tmp
		// advised closing /tmp (a probe).
		return nil, fmt.Errorf("keyring: %s is not a file (mode %v): PISYNC_KEY_FILE names the team key's file, which pisyncd key init or import writes", path, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keyring: %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := fsutil.ReadSetting(path, fsutil.SettingMax)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	var r Ring
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("keyring: %s: %w", path, err)
	}
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	return &r, nil
}

// Save writes r to path, 0600, atomically.
func Save(path string, r *Ring) error {
	if err := r.Check(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("keyring: write %s: %w", path, err)
	}
	return nil
}
