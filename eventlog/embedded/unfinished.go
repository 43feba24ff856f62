package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// unfinishedDir is where setAsideUnfinished moves streams, in the state dir.
const unfinishedDir = "jetstream-unfinished"

// setAsideUnfinished moves out of the store every stream directory whose
// creation a kill interrupted. nats-server writes a new stream's key (in an
// encrypted store), then its config (meta.inf), then the config's checksum
// (meta.sum), each a file of its own, before the stream takes its first
// message. It skips a directory without the config or its checksum with a
// warning, and creating the stream again in it fails ("corrupt state
// file"), or the encrypted store's check refuses it: the daemon could not
// start again (TestSIGKILLExactlyOnceStoreCipher, about one run in twenty).
// Such a directory holds no message, but it is moved to
// STATE_DIR/jetstream-unfinished, not deleted: a config lost some other way
// would leave a stream's messages there, for a person to look at.
func setAsideUnfinished(stateDir string, logger *slog.Logger) error {
	storeDir := filepath.Join(stateDir, server.JetStreamStoreDir)
	accs, err := os.ReadDir(storeDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("store: %w", err)
	}
	for _, a := range accs {
		if !a.IsDir() {
			continue // nats-server's probe of the dir, left by a kill
		}
		streams, err := os.ReadDir(filepath.Join(storeDir, a.Name(), "streams"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: %w", err)
		}
		for _, st := range streams {
			if !st.IsDir() || strings.HasPrefix(st.Name(), ".") {
				continue // a stream being deleted: nats-server removes it
			}
			dir := filepath.Join(storeDir, a.Name(), "streams", st.Name())
			if finished(dir) {
				continue
			}
			to := filepath.Join(stateDir, unfinishedDir, a.Name()+"-"+st.Name()+"-"+strconv.FormatInt(time.Now().UnixNano(), 10))
			if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
				return fmt.Errorf("store: %w", err)
			}
			if err := os.Rename(dir, to); err != nil {
				return fmt.Errorf("store: set aside the unfinished stream %s: %w", st.Name(), err)
			}
			logger.Warn("a stream whose creation was interrupted (no config or no checksum of it) is set aside; it is created again", "stream", st.Name(), "moved_to", to)
		}
	}
	return nil
}

// finished reports whether a stream directory holds its config and the
// config's checksum.
func finished(dir string) bool {
	for _, f := range []string{server.JetStreamMetaFile, server.JetStreamMetaFileSum} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}
