package embedded

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/pisyncd/pisyncd/internal/fsutil"
)

// Store ciphers nats-server encrypts a JetStream store at rest with
// (Config.StoreCipher); "" or StoreCipherOff leaves it in clear.
const (
	StoreCipherOff        = "off"
	StoreCipherChaChaPoly = "chachapoly"
	StoreCipherAES        = "aes"
)

// StoreKeyFileName is the store key's file in the state dir (0600) unless
// Config.StoreKeyFile names another.
const StoreKeyFileName = "store-key"

// storeMarkerName records, beside the store, which cipher encrypted it
// and a check value of its key (never the key): nats-server does not say
// when a key is wrong, it skips every stream it cannot decrypt (a warning
// in its log), and pisyncd would then make new, empty streams over them.
const storeMarkerName = "store-cipher.json"

// storeMarker is the content of storeMarkerName.
type storeMarker struct {
	Cipher string `json:"cipher"`
	Check  string `json:"key_check"`
}

// ParseStoreCipher checks a cipher name and returns it in the form
// Config.StoreCipher takes ("" for off). It takes the names
// config.checkStoreCipher lets through, no others.
func ParseStoreCipher(s string) (string, error) {
	switch c := strings.ToLower(strings.TrimSpace(s)); c {
	case "", StoreCipherOff:
		return "", nil
	case StoreCipherChaChaPoly, StoreCipherAES:
		return c, nil
	}
	return "", fmt.Errorf("store cipher %q: want off, chachapoly or aes", s)
}

// storeState is what the store on disk holds.
type storeState struct {
	encrypted bool // some stream or consumer has a meta.key
	plain     bool // some stream or consumer has a meta.inf and no meta.key
}

// scanStore looks at every stream and consumer directory of the store
// (each holds meta.inf, and meta.key when encrypted).
func scanStore(storeDir string) (storeState, error) {
	var st storeState
	err := filepath.WalkDir(storeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || d.Name() != server.JetStreamMetaFile {
			return nil
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), server.JetStreamMetaFileKey)); err == nil {
			st.encrypted = true
		} else {
			st.plain = true
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("store encryption: scan %s: %w", storeDir, err)
	}
	return st, nil
}

// storeKey returns the key nats-server should encrypt the store with, ""
// when cipher is off. It refuses, naming cause and fix, every
// start that would leave an encrypted store unread or a plain one half
// converted: a store encrypted at rest with the cipher off, its key file
// missing or another key, its cipher changed, and the cipher turned on
// for a store that holds data in clear (nats-server 2.15.3 converts it
// as it starts, TestNATSConvertsAtStart, but by rewriting each block
// file in place: a crash or a full disk mid-rewrite tears the block, its
// clear original gone). On a store with nothing in it yet, it makes the
// key (0600) at first use.
// setting names the variable that sets the cipher, for the errors.
func storeKey(stateDir, cipher, keyFile, setting string) (key string, commit func() error, err error) {
	storeDir := filepath.Join(stateDir, server.JetStreamStoreDir)
	st, err := scanStore(storeDir)
	if err != nil {
		return "", nil, err
	}
	markerPath := filepath.Join(stateDir, storeMarkerName)
	marker, err := readMarker(markerPath)
	if err != nil {
		return "", nil, err
	}
	keyPath := StoreKeyPath(stateDir, keyFile)
	aside := fmt.Sprintf("to start over with an empty store instead, stop pisyncd and move %s aside (session files are not in it: the new store is filled again from them and from the hub; what only the old store held stays in the copy, docs/SECURITY.md)", storeDir)
	if cipher == "" {
		if st.encrypted {
			was := marker.Cipher
			if was == "" {
				was = StoreCipherChaChaPoly + " or " + StoreCipherAES
			}
			return "", nil, fmt.Errorf("store encryption: the JetStream store %s is encrypted at rest, and store encryption is off: nats-server would skip every stream it cannot read. Set %s=%s (with its key %s); %s", storeDir, setting, was, keyPath, aside)
		}
		return "", nil, nil
	}
	if st.plain {
		return "", nil, fmt.Errorf("store encryption: %s=%s, but the JetStream store %s holds data in clear, and pisyncd does not convert a store in place (nats-server would rewrite each block file where it is, and a crash or a full disk during that loses the block). Set %s=off to keep this store, or: %s", setting, cipher, storeDir, setting, aside)
	}
	key, err = readStoreKey(keyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist) && st.encrypted:
		return "", nil, fmt.Errorf("store encryption: the JetStream store %s is encrypted at rest, and its key file %s is missing: put back the key it was encrypted with (from your backup of the state dir); without it nothing in the store can be read. %s", storeDir, keyPath, aside)
	case errors.Is(err, fs.ErrNotExist):
		if key, err = newStoreKey(keyPath); err != nil {
			return "", nil, err
		}
	case err != nil:
		return "", nil, err
	}
	check := keyCheck(key)
	if st.encrypted && marker.Check != "" {
		if !hmac.Equal([]byte(marker.Check), []byte(check)) {
			return "", nil, fmt.Errorf("store encryption: the key in %s is not the key the JetStream store %s was encrypted with (its check value differs from %s): put back the right key file; %s", keyPath, storeDir, markerPath, aside)
		}
		if marker.Cipher != cipher {
			return "", nil, fmt.Errorf("store encryption: the JetStream store %s was encrypted with %s, and %s is %s: pisyncd does not convert a store from one cipher to the other; set %s=%s, or: %s", storeDir, marker.Cipher, setting, cipher, setting, marker.Cipher, aside)
		}
	}
	if marker.Cipher == cipher && marker.Check == check {
		return key, nil, nil
	}
	// A new store, or one whose marker was lost: written once the server
	// has opened every stream with this key (checkStoreOpened), so that a
	// wrong key is never recorded as the store's.
	commit = func() error {
		b, _ := json.Marshal(storeMarker{Cipher: cipher, Check: check})
		if err := fsutil.WriteFileAtomic(markerPath, append(b, '\n')); err != nil {
			return fmt.Errorf("store encryption: %w", err)
		}
		return nil
	}
	return key, commit, nil
}

// StoreKeyPath is where the store key is kept: keyFile, else
// StoreKeyFileName in the state dir.
func StoreKeyPath(stateDir, keyFile string) string {
	if keyFile != "" {
		return keyFile
	}
	return filepath.Join(stateDir, StoreKeyFileName)
}

func readMarker(path string) (storeMarker, error) {
	var m storeMarker
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("store encryption: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("store encryption: %s is not pisyncd's store marker (%v): delete it, and the next start writes it again", path, err)
	}
	return m, nil
}

// readStoreKey reads a key file: one line, 32 random bytes in base64.
func readStoreKey(path string) (string, error) {
	b, err := fsutil.ReadSetting(path, fsutil.SettingMax)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("store encryption: key file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if raw, err := base64.StdEncoding.DecodeString(key); err != nil || len(raw) < 32 {
		return "", fmt.Errorf("store encryption: %s is not a store key (want 32 bytes or more in base64, as pisyncd writes it)", path)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", fmt.Errorf("store encryption: key file: %w", err)
		}
	}
	return key, nil
}

func newStoreKey(path string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("store encryption: random: %w", err)
	}
	key := base64.StdEncoding.EncodeToString(raw)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("store encryption: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, []byte(key+"\n")); err != nil {
		return "", fmt.Errorf("store encryption: %w", err)
	}
	return key, nil
}

// keyCheck tells keys apart without revealing them.
func keyCheck(key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("pisyncd store key check v1"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// applyStoreCipher sets opts to encrypt the store with key ("" leaves
// the store in clear).
func applyStoreCipher(opts *server.Options, cipher, key string) {
	if key == "" {
		return
	}
	opts.JetStreamKey = key
	opts.JetStreamCipher = server.ChaCha
	if cipher == StoreCipherAES {
		opts.JetStreamCipher = server.AES
	}
}

// checkStoreOpened fails when nats-server left a stream of the encrypted
// store unopened: it skips, with a warning in its log, a stream whose key
// it cannot recover, and pisyncd would then make an empty one in its
// place. It catches a wrong key that the marker could not (the marker
// lost), and counts the streams of every account on disk.
func checkStoreOpened(ns *server.Server, stateDir string) error {
	storeDir := filepath.Join(stateDir, server.JetStreamStoreDir)
	accs, err := os.ReadDir(storeDir)
	if err != nil {
		return fmt.Errorf("store encryption: %w", err)
	}
	for _, a := range accs {
		streams, _ := os.ReadDir(filepath.Join(storeDir, a.Name(), "streams"))
		onDisk := 0
		for _, st := range streams {
			dir := filepath.Join(storeDir, a.Name(), "streams", st.Name())
			if strings.HasPrefix(st.Name(), ".") {
				continue // a stream being deleted: nats-server removes it
			}
			if _, err := os.Stat(filepath.Join(dir, server.JetStreamMetaFileKey)); err != nil {
				continue
			}
			if !finished(dir) {
				// A kill while nats-server created it, left by
				// setAsideUnfinished only if it appeared since.
				continue
			}
			onDisk++
		}
		if onDisk == 0 {
			continue
		}
		acc, err := ns.LookupAccount(a.Name())
		if err != nil {
			return fmt.Errorf("store encryption: account %s of the store: %w", a.Name(), err)
		}
		if opened := acc.JetStreamUsage().Streams; opened < onDisk {
			return fmt.Errorf("store encryption: nats-server opened %d of the %d encrypted streams in %s (the log says why): a wrong store key? Put back the key the store was encrypted with", opened, onDisk, filepath.Join(storeDir, a.Name()))
		}
	}
	return nil
}
