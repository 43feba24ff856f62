package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

const (
	// credsFileName is the listener credentials file in the state dir.
	credsFileName = "client-context.json"
	// seedFileName holds the listener user's nkey seed, beside it.
	seedFileName = "client.nk"
)

// clientContext is the credentials file: a subset of the nats CLI context
// format (ADR-21), so `nats --context <path>` loads it as it is (the CLI
// treats an existing path ending in .json as a context file). Other tools
// read url and nkey, the path of the seed file.
//
// The user is an nkey: a client proves it holds the seed by signing the
// server's nonce, so a program listening on the port while the daemon is
// down (another local user may bind it) learns nothing it could replay.
// A password, as before, was sent as it is on every connect.
type clientContext struct {
	Description string `json:"description"`
	URL         string `json:"url"`
	Nkey        string `json:"nkey"`
}

// listenerCreds are the listener user's credentials as kept in the state
// dir: the context file and the seed.
type listenerCreds struct {
	ctx    clientContext
	public string // the user's public key, for the server
}

// loadOrCreateCreds returns the listener credentials kept in dir,
// generating them on first use. The seed survives restarts so that tools
// configured once keep working; the url is rewritten whenever the
// listener address changes (port 0 picks a new port each start). A
// context file of an older release, with a user and password, is
// replaced.
func loadOrCreateCreds(dir string, log *slog.Logger) (listenerCreds, error) {
	path, seedPath := filepath.Join(dir, credsFileName), filepath.Join(dir, seedFileName)
	var cc clientContext
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return listenerCreds{}, fmt.Errorf("credentials: %w", err)
	default:
		if err := json.Unmarshal(b, &cc); err != nil {
			return listenerCreds{}, fmt.Errorf("credentials: %s is not a valid credentials file (delete it to generate new credentials)", path)
		}
	}
	seed, err := os.ReadFile(seedPath)
	if errors.Is(err, fs.ErrNotExist) {
		if cc.Nkey == "" && len(b) > 0 {
			log.Info("listener credentials replaced: subscribers now authenticate with an nkey, not a password (docs/SUBSCRIBING.md)", "credentials", path)
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return listenerCreds{}, fmt.Errorf("credentials: %w", err)
		}
		if seed, err = kp.Seed(); err != nil {
			return listenerCreds{}, fmt.Errorf("credentials: %w", err)
		}
		if err := fsutil.WriteFileAtomic(seedPath, append(seed, '\n')); err != nil {
			return listenerCreds{}, fmt.Errorf("credentials: %w", err)
		}
	} else if err != nil {
		return listenerCreds{}, fmt.Errorf("credentials: %w", err)
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(seed))
	if err != nil {
		return listenerCreds{}, fmt.Errorf("credentials: %s holds no nkey seed (delete it to generate new credentials): %w", seedPath, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return listenerCreds{}, fmt.Errorf("credentials: %s is not a user's nkey seed (delete it to generate new credentials)", seedPath)
	}
	// Tighten rather than refuse: the files are ours, and a refusal would
	// only stop the daemon until someone runs chmod.
	for _, p := range []string{path, seedPath} {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm() != 0o600 {
			log.Warn("credentials file had loose permissions; set to 0600", "path", p, "mode", st.Mode().Perm().String())
			if err := os.Chmod(p, 0o600); err != nil {
				return listenerCreds{}, fmt.Errorf("credentials: %w", err)
			}
		}
	}
	cc.Description = "pisyncd local listener (generated; keep private)"
	cc.Nkey = seedPath
	return listenerCreds{ctx: cc, public: pub}, nil
}

// saveCreds writes the context file unless it holds cc already: a start
// on the same port rewrites nothing.
func saveCreds(path string, cc clientContext) error {
	b, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, append(b, '\n')) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}
