package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// erasure is a session erased here for another node's erase event: this
// node's key messages of it published before the erase are to be
// destroyed on the hub (Crypt.EraseKeys), those it published since (Keep,
// by key id: the session went on, a new session under the same id) are
// not. Kept in the state bucket, so that a restart neither forgets the
// tombstones owed nor, replaying the erase event, destroys newer keys.
type erasure struct {
	Seq  uint64   `json:"seq"` // the erase event's PI_ALL sequence
	Keep []string `json:"keep,omitempty"`
	Done bool     `json:"done,omitempty"`
}

// erasurePrefix prefixes an erasure's key in the state bucket; the
// session's token follows.
const erasurePrefix = "crypt.erase."

// stateTimeout bounds one write of an erasure to the local state bucket.
const stateTimeout = 10 * time.Second

// UseState keeps erasures in the state bucket kv and loads those kept
// there: tombstones still owed are destroyed by the forwarder as if the
// erase had just been applied. Call it before the replicator and the
// forwarder run.
func (c *Crypt) UseState(ctx context.Context, kv jetstream.KeyValue) error {
	lister, err := kv.ListKeysFiltered(ctx, erasurePrefix+">")
	if err != nil {
		return fmt.Errorf("eventlog: erasures: %w", err)
	}
	loaded := map[string]*erasure{}
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("eventlog: erasures: %w", err)
		}
		var er erasure
		if err := json.Unmarshal(e.Value(), &er); err != nil {
			return fmt.Errorf("eventlog: erasure %s: %w", k, err)
		}
		loaded[strings.TrimPrefix(k, erasurePrefix)] = &er
	}
	sealed, err := kv.Get(ctx, sealedKey)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("eventlog: %s: %w", sealedKey, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state = kv
	if err == nil {
		c.sealedFor = string(sealed.Value())
		c.startTeamLocked()
	}
	c.statusLocked()
	for tok, e := range loaded {
		if cur := c.erasures[tok]; cur == nil || cur.Seq < e.Seq {
			c.erasures[tok] = e
		}
	}
	c.signalErasureLocked()
	return nil
}

// saveErasureLocked writes tok's erasure to the state bucket, if one is
// used.
func (c *Crypt) saveErasureLocked(tok string) error {
	if c.state == nil {
		return nil
	}
	b, _ := json.Marshal(c.erasures[tok])
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	if _, err := c.state.Put(ctx, erasurePrefix+tok, b); err != nil {
		return fmt.Errorf("eventlog: erasure of %s: %w", tok, err)
	}
	return nil
}

// keepKeyLocked records that key message kid of tok was published after
// tok's erasure, which must not destroy it.
func (c *Crypt) keepKeyLocked(tok, kid string) error {
	e := c.erasures[tok]
	if e == nil || e.Done || slices.Contains(e.Keep, kid) {
		return nil
	}
	e.Keep = append(e.Keep, kid)
	return c.saveErasureLocked(tok)
}

// erasedLocked marks tok's erasure done: every key message it was owed is
// a tombstone.
func (c *Crypt) erasedLocked(tok string) error {
	e := c.erasures[tok]
	if e == nil || e.Done {
		return nil
	}
	e.Done, e.Keep = true, nil
	return c.saveErasureLocked(tok)
}

func (c *Crypt) signalErasureLocked() {
	select {
	case c.erasedC <- struct{}{}:
	default:
	}
}

// sealedKey records, in the state bucket, the team this node sealed its
// lines for (Crypt.sealedFor).
const sealedKey = "crypt.sealed"

// recordSealingLocked records, once, that this node seals its lines for
// its keyring's team, before the first sealed line leaves: a keyring gone
// later then fails closed under auto rather than send in clear.
func (c *Crypt) recordSealingLocked() error {
	if c.state == nil || c.sealedFor == c.ring.Team {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.state.Put(ctx, sealedKey, []byte(c.ring.Team)); err != nil {
		return fmt.Errorf("eventlog: record that this node seals: %w", err)
	}
	c.sealedFor = c.ring.Team
	return nil
}
