package embedded

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// RouteSecretFile is the name `hub certs` and `hub dev-init` give the
// route secret, beside the certificates.
const RouteSecretFile = "route.secret"

// ReadRouteSecret reads the cluster's route secret from path (surrounding
// white space trimmed) and checks it.
func ReadRouteSecret(path string) (string, error) {
	b, err := fsutil.ReadSetting(path, fsutil.SettingMax)
	if err != nil {
		return "", fmt.Errorf("route secret: %w", err)
	}
	s := string(bytes.TrimSpace(b))
	if !routeSecretPattern().MatchString(s) {
		return "", fmt.Errorf("route secret %s: want 32 to 512 characters of [A-Za-z0-9._~+/=-] (e.g. `head -c 32 /dev/urandom | base64`)", path)
	}
	return s, nil
}

// GenerateRouteSecret writes a new random route secret (256 bits,
// base64url) to path, 0600, unless path exists: every node of a cluster
// must keep the same one. It reports whether it wrote one.
func GenerateRouteSecret(path string) (bool, error) {
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("route secret: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, fmt.Errorf("route secret: %w", err)
	}
	if err := fsutil.ReplaceFileKeepOwner(path, []byte(base64.RawURLEncoding.EncodeToString(b[:])+"\n")); err != nil {
		return false, fmt.Errorf("route secret: %w", err)
	}
	return true, nil
}
