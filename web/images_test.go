package web

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"runtime"
	"testing"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/internal/testenv"
	"github.com/pisyncd/pisyncd/projection"
)

// TestImageAskedUnderManySpellings: one image named by many URLs (a
// percent-escape, leading zeros: one URL each for a browser) is found by
// parsing its entry's line once, not once a request. Before, a teammate's
// session naming an over-sized image 640 times kept both cores busy while
// its page was open, and 16 requests at once took the daemon to 1.12 GB (a
// web probe, 2026-12-07). What the requests allocate is measured: each
// parse of the 17 MB line allocates at least its 17 MB of base64.
func TestImageAskedUnderManySpellings(t *testing.T) {
	d := startDaemon(t)
	big := make([]byte, 13<<20) // 17.3 MiB of base64: past maxImageB64
	r := rand.New(rand.NewPCG(3, 4))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	small := noisePNG(t, 8, 8)
	d.write(sid1, testenv.Header(sid1), imageEntry("x1", "", big), imageEntry("x2", "x1", small))
	d.waitEntries(sid1, 2)

	base := "/api/s/" + sid1 + "/image/"
	if resp, _ := d.get(base + "x1/0"); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("the over-sized image: %d", resp.StatusCode)
	}
	spellings := []string{"x1/00", "x1/000", "%781/0", "x%31/0", "%78%31/00", "x1/0000", "x1/00000", "%781/000"}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		for _, p := range spellings {
			if resp, _ := d.get(base + p); resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Fatalf("%s: %d", p, resp.StatusCode)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got, one := after.TotalAlloc-before.TotalAlloc, uint64(len(big)*4/3); got > 2*one {
		t.Errorf("%d requests for the image allocated %d MB; one parse of its line allocates about %d MB", 3*len(spellings), got>>20, one>>20)
	}
	// An image that is served comes back the same from the kept answer.
	for range 2 {
		resp, body := d.get(base + "x2/0")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal([]byte(body), small) {
			t.Fatalf("the small image: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
	}
}

// erasedSource is a Source whose sessions were all erased up to below.
type erasedSource struct {
	Source
	below projection.Src
}

func (s erasedSource) ErasedBelow(string) projection.Src { return s.below }

// TestErasedImageNotRecalled: a snapshot kept from before its session was
// erased serves none of its entries' images, even where the session came
// back with entries of the same ids; the fresh read does. (The erased
// image was served from the kept snapshot for as long as it was kept: a
// probe, 2026-12-07.)
func TestErasedImageNotRecalled(t *testing.T) {
	d := startDaemon(t)
	d.write(sid1, testenv.Header(sid1), imageEntry("x1", "", noisePNG(t, 4, 4)))
	d.waitEntries(sid1, 1)
	if resp, body := d.get("/api/s/" + sid1); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session: %d %.200s", resp.StatusCode, body)
	}
	if d.web.recall(sid1, "x1") == nil {
		t.Fatal("the page's snapshot is not kept")
	}
	src, err := d.worker.Positions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	real := d.web.opts.Source
	d.web.opts.Source = erasedSource{Source: real, below: src}
	defer func() { d.web.opts.Source = real }()
	if d.web.recall(sid1, "x1") != nil {
		t.Error("a snapshot of the erased lines is recalled")
	}
	d.web.opts.Source = erasedSource{Source: real, below: projection.Src{eventlog.LocalStream: 0}}
	if d.web.recall(sid1, "x1") == nil {
		t.Error("a snapshot of lines after the erase is not recalled")
	}
}
