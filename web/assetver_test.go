package web

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http/httptest"
	"regexp"
	"testing"
)

// TestAssetsVersioned: every asset a page names carries its content's
// hash, a versioned URL is served immutable and an unversioned or stale
// one is revalidated, both with the file itself.
func TestAssetsVersioned(t *testing.T) {
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		t.Fatal(err)
	}
	a, err := loadAssets(static)
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`"/assets/([^"?]+)(?:\?v=([0-9a-f]*))?"`)
	for _, page := range pageNames {
		refs := ref.FindAllSubmatch(a.pages[page], -1)
		if len(refs) < 3 {
			t.Fatalf("%s names %d assets: %s", page, len(refs), a.pages[page])
		}
		for _, m := range refs {
			name, v := string(m[1]), string(m[2])
			b, err := fs.ReadFile(static, name)
			if err != nil {
				t.Fatalf("%s names %s: %v", page, name, err)
			}
			sum := sha256.Sum256(b)
			if v != hex.EncodeToString(sum[:6]) {
				t.Errorf("%s names %s at version %q, want its hash", page, name, v)
			}
		}
	}
	want, _ := fs.ReadFile(static, "list.js")
	h := a.serve(static)
	for url, cc := range map[string]string{
		"/assets/list.js?v=" + a.version["list.js"]: "public, max-age=31536000, immutable",
		"/assets/list.js":                "no-cache",
		"/assets/list.js?v=000000000000": "no-cache",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
		if rec.Code != 200 || rec.Body.String() != string(want) {
			t.Errorf("%s: status %d, %d bytes, want the file", url, rec.Code, rec.Body.Len())
		}
		if got := rec.Header().Get("Cache-Control"); got != cc {
			t.Errorf("%s: Cache-Control %q, want %q", url, got, cc)
		}
	}
}
