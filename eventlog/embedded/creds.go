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
	"path/filepath"
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

// writeFileAtomic writes data to path with mode 0600 through a temp file,
// fsync and rename, so a crash leaves the old file or the new, never half.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*") // created 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func saveCreds(path string, cc clientContext) error {
	b, err := json.MarshalIndent(cc, "", "  ")
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	return nil
}
