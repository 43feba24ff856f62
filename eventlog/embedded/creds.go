package embedded

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// credsFileName is the listener credentials file in the state dir.
const credsFileName = "client-context.json"

// clientContext is the credentials file: a subset of the nats CLI context
// format (ADR-21), so `nats --context <path>` loads it as it is (the CLI
// treats an existing path ending in .json as a context file). Other tools
// read url, user and password.
type clientContext struct {
	Description string `json:"description"`
	URL         string `json:"url"`
	User        string `json:"user"`
	Password    string `json:"password"`
}

// loadOrCreateCreds returns the listener credentials kept in path,
// generating them on first use. The user and password survive restarts so
// that tools configured once keep working; the url is rewritten whenever
// the listener address changes (port 0 picks a new port each start).
func loadOrCreateCreds(path string, log *slog.Logger) (clientContext, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return newCreds()
	case err != nil:
		return clientContext{}, fmt.Errorf("credentials: %w", err)
	}
	var cc clientContext
	if err := json.Unmarshal(b, &cc); err != nil || cc.User == "" || cc.Password == "" {
		return clientContext{}, fmt.Errorf("credentials: %s is not a valid credentials file (delete it to generate new credentials)", path)
	}
	// Tighten rather than refuse: the file is ours, and a refusal would
	// only stop the daemon until someone runs chmod.
	if st, err := os.Stat(path); err == nil && st.Mode().Perm() != 0o600 {
		log.Warn("credentials file had loose permissions; set to 0600", "path", path, "mode", st.Mode().Perm().String())
		if err := os.Chmod(path, 0o600); err != nil {
			return clientContext{}, fmt.Errorf("credentials: %w", err)
		}
	}
	return cc, nil
}

func newCreds() (clientContext, error) {
	user, err := randomString(6, hex.EncodeToString)
	if err != nil {
		return clientContext{}, err
	}
	pass, err := randomString(32, base64.RawURLEncoding.EncodeToString)
	if err != nil {
		return clientContext{}, err
	}
	return clientContext{
		Description: "pisyncd local listener (generated; keep private)",
		User:        "local-" + user,
		Password:    pass,
	}, nil
}

func randomString(n int, enc func([]byte) string) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("credentials: random: %w", err)
	}
	return enc(b), nil
}

func saveCreds(path string, cc clientContext) error {
	b, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}
