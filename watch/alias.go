package watch

import (
	"maps"
	"sync"
)

// aliasSet holds the paths discovery passed over as a second path of a
// file it follows under another (a hard link), for the workers: when a
// followed file's path goes, the file may live on under one of them.
type aliasSet struct {
	mu    sync.Mutex
	paths map[string]struct{}
}

// set replaces the set with a copy of paths (a walk's whole finding).
func (a *aliasSet) set(paths map[string]struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.paths = maps.Clone(paths)
}

func (a *aliasSet) add(path string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paths == nil {
		a.paths = map[string]struct{}{}
	}
	a.paths[path] = struct{}{}
}

// of returns a path in the set that holds the file dev, ino now, or "".
func (a *aliasSet) of(dev, ino uint64) string {
	a.mu.Lock()
	paths := make([]string, 0, len(a.paths))
	for p := range a.paths {
		paths = append(paths, p)
	}
	a.mu.Unlock()
	for _, p := range paths {
		if st, err := statSig(p); err == nil && st.key() == (fileKey{dev, ino}) {
			return p
		}
	}
	return ""
}
