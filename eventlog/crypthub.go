package eventlog

import (
	"errors"
	"fmt"
	"time"
)

// hubLookEvery is how often a machine without a team key, under auto,
// asks the hub again whether its team encrypts, while it forwards lines in
// clear: a teammate's first key message is seen within this, or at once
// at the daemon's start.
const hubLookEvery = 10 * time.Second

// lookAtHub learns, under auto with no keyring here, whether the team
// encrypts: PI_KEYS on the hub holding any message (a key message, or the
// tombstone of one) says a machine of the team seals its lines. Until a
// team key is imported, such a machine then forwards nothing (subject),
// as under on: before, a machine that joined an encrypting team before
// its key was imported sent its sessions to the hub in clear, where the
// hub's operator could read them and where its teammates, who require
// sealing, refused their first lines, so that the session never reached
// them. A team that does not encrypt sets PISYNC_ENCRYPT=off, or has no
// key message on its hub. count is the number of messages on PI_KEYS.
func (c *Crypt) lookAtHub(count func() (uint64, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.refreshLocked(now)
	if c.ring != nil || c.always || c.hubSealed != "" || (!c.hubLooked.IsZero() && now.Sub(c.hubLooked) < hubLookEvery) {
		return nil
	}
	n, err := count()
	if err != nil {
		return err
	}
	c.hubLooked = now
	if n == 0 {
		return nil
	}
	c.hubSealed = fmt.Sprintf("the hub's %s holds %d key message(s): a machine of this team seals its lines", KeysStream, n)
	c.logger.Warn("this machine has no team key, and its team encrypts: nothing is forwarded to the hub until the team key is here, so that no line goes there in clear; "+c.hubSealed,
		"hint", "pisyncd key import the block a teammate's `pisyncd key export` prints (PISYNC_ENCRYPT=off to send lines in clear on purpose)")
	c.statusLocked()
	return nil
}

// ErrTeamEncrypts: under auto, this machine has no team key, and the hub
// shows that its team encrypts (lookAtHub), so nothing is forwarded.
var ErrTeamEncrypts = errors.New("no team key here, and the team encrypts")

// teamEncryptsWait follows ErrTeamEncrypts in what status says of
// forwarding then.
const teamEncryptsWait = " (%s): nothing is forwarded to the hub until the team's key is imported (pisyncd key import the block of a teammate's pisyncd key export; PISYNC_ENCRYPT=off to send in clear on purpose)"
