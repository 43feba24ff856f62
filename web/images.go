package web

import (
	"encoding/base64"
	"net/http"

	"github.com/pisyncd/pisyncd/session"
)

// An image is found by parsing its entry's whole line, which may be tens
// of MB (pi writes a pasted screenshot into the message as base64, and
// several into one line). A page asks for each image once, but one
// session's text can name the same image under many spellings (a
// percent-escape, a leading zero: one URL each for the browser), and a
// teammate's session did so 640 times in one page (a web probe,
// 2026-12-07): every request parsed the 17.5 MB line again, without a
// read slot when the snapshot was kept, and 16 at once took the daemon to
// 1.12 GB against its 512 MiB budget and both cores for as long as the
// page was open. So each answer is kept, by the line's position and the
// image's index, for as long as the snapshots are (KeepFor), and a parse
// takes a read slot (Options.MaxReads) like a whole-session read.

type imageKey struct {
	sid string
	ref session.Ref
	n   int
}

// imageAnswer is what a request for an image found: the image and its
// type, or the status and message of a refusal.
type imageAnswer struct {
	mime string
	img  []byte
	code int
	msg  string
}

const (
	imageCache      = 16       // answers kept
	imageCacheBytes = 24 << 20 // bytes of images kept, at most
)

type cachedImage struct {
	key imageKey
	ans imageAnswer
}

// findImage decodes image n of an entry's line, as serveImage answers it.
func findImage(raw []byte, n int) imageAnswer {
	bl, ok := imageBlock(raw, n)
	if !ok {
		return imageAnswer{code: http.StatusNotFound, msg: "web: image: none at that index"}
	}
	mime, data := imageType(str(bl.MimeType)), str(bl.Data)
	if mime == "" || len(data) > maxImageB64 {
		return imageAnswer{code: http.StatusUnsupportedMediaType, msg: "web: image: not served (type or size)"}
	}
	img, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return imageAnswer{code: http.StatusUnprocessableEntity, msg: "web: image: " + err.Error()}
	}
	return imageAnswer{mime: mime, img: img}
}

func (a imageAnswer) write(w http.ResponseWriter) {
	if a.code != 0 {
		http.Error(w, a.msg, a.code)
		return
	}
	w.Header().Set("Content-Type", a.mime)
	w.Header().Set("Cache-Control", "no-store") // erased with its session, not kept in a cache
	w.Write(a.img)
}

// keptImage returns the kept answer for k.
func (s *Server) keptImage(k imageKey) (imageAnswer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.images {
		if c.key == k {
			return c.ans, true
		}
	}
	return imageAnswer{}, false
}

// keepImage keeps the answer for k, newest first, within imageCache
// answers and imageCacheBytes of images.
func (s *Server) keepImage(k imageKey, a imageAnswer) {
	if len(a.img) > imageCacheBytes {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetForget()
	kept := []cachedImage{{k, a}}
	size := len(a.img)
	for _, c := range s.images {
		if c.key == k || len(kept) == imageCache || size+len(c.ans.img) > imageCacheBytes {
			continue
		}
		kept = append(kept, c)
		size += len(c.ans.img)
	}
	s.images = kept
}
