package replicate

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// createFile stages a new session file as .pisync-<16 hex digits>.tmp in
// its project folder and unlinks the name once the file is linked into
// place; a crash (kill -9, power) in between leaves the staging file.

const stagingPrefix, stagingSuffix, stagingHex = ".pisync-", ".tmp", 16

// staging reports whether name is exactly one of createFile's staging
// names.
func staging(name string) bool {
	h, ok := strings.CutPrefix(name, stagingPrefix)
	if !ok {
		return false
	}
	if h, ok = strings.CutSuffix(h, stagingSuffix); !ok || len(h) != stagingHex || strings.ToLower(h) != h {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// stagingMinAge is how old a staging file behind a linked project folder
// must be to be taken for a leftover (sweepStaging).
const stagingMinAge = time.Minute

// sweepStaging removes the staging files a crash left in the project
// folders of root (where createFile makes them, one level down): regular
// files with exactly createFile's names, never links or folders. It runs
// as the replicator starts, before it creates any file. Only one daemon
// follows a sessions dir (watch.LockRoot), and only its replicator stages
// files, so in a folder of root every staging file is a leftover. A
// linked project folder lies outside root and may be linked from another
// sessions dir as well, whose daemon may be staging a file there now: a
// staging file lives while one file is written and fsynced, so there
// only one older than stagingMinAge is removed. It returns the paths
// removed; a folder it cannot read is passed over.
func sweepStaging(root string, now time.Time) (removed []string, err error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, de := range ents {
		if strings.HasPrefix(de.Name(), ".") {
			continue // the trash, and anything else hidden: createFile never stages there
		}
		dir := filepath.Join(root, de.Name())
		linked := de.Type()&fs.ModeSymlink != 0
		if linked {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				continue
			}
		} else if !de.IsDir() {
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, away or not ours to read: the tailer says so
		}
		for _, fe := range files {
			if !fe.Type().IsRegular() || !staging(fe.Name()) {
				continue
			}
			p := filepath.Join(dir, fe.Name())
			if linked {
				if info, err := fe.Info(); err != nil || now.Sub(info.ModTime()) < stagingMinAge {
					continue
				}
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, p)
		}
	}
	return removed, errors.Join(errs...)
}
