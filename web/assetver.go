package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"strings"
)

// assetSet is the page shells with every asset they name carrying its
// content's hash (/assets/list.js?v=…). A versioned URL is served as
// immutable, so a browser that has the page's scripts and styles runs
// them from its cache on the next visit instead of asking for each
// first: that wait was most of a warm first paint of the list. A new
// binary's changed asset is a new URL.
type assetSet struct {
	pages   map[string][]byte // page name → shell with versioned URLs
	version map[string]string // asset name → its hash
}

// pageNames are the shells served as pages; every other file of assets/
// is an asset they may name.
var pageNames = []string{"index.html", "session.html"}

func loadAssets(static fs.FS) (*assetSet, error) {
	a := &assetSet{pages: map[string][]byte{}, version: map[string]string{}}
	names, err := fs.Glob(static, "*")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		b, err := fs.ReadFile(static, name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		a.version[name] = hex.EncodeToString(sum[:6])
	}
	for _, name := range pageNames {
		b, err := fs.ReadFile(static, name)
		if err != nil {
			return nil, err
		}
		for asset, v := range a.version {
			b = bytes.ReplaceAll(b, []byte(`"/assets/`+asset+`"`), []byte(`"/assets/`+asset+`?v=`+v+`"`))
		}
		a.pages[name] = b
	}
	return a, nil
}

// serve serves the files of static: immutable when asked for at the
// version they are, else revalidated each time (an old page's URL, or a
// hand-typed one).
func (a *assetSet) serve(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.StripPrefix("/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/")
		if v, ok := a.version[name]; ok && r.URL.Query().Get("v") == v {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	}))
}
