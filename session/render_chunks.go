package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
)

// A whole file's context (`context FILE`, a file of up to 32 MiB held in
// memory) is written on two cores: finding each window entry's messages
// again and compacting them is a fifth of that command's time, and the
// bodies, all in memory, can be read by two goroutines at once. The window
// is cut into chunks of about renderChunk bytes of bodies; a helper renders the odd
// chunks into buffers while this goroutine renders the even ones straight
// into the output, and writes each of the helper's buffers in its turn, so
// that the bytes, and the first error, are the sequential loop's.

// renderChunk is about how many bytes of bodies a chunk holds: enough
// that handing a buffer over (a goroutine woken) costs little beside
// rendering it; 64-entry chunks of a 10,000-entry file were 0.5 ms slower
// than 256-entry ones (~130 KB), and 512-entry ones 0.3 ms.
const renderChunk = 128 << 10

// renderChunks cuts ix's window into chunks of about size bytes of the
// bodies src holds, as the bounds of the window entries they hold: chunk c
// is [bounds[c], bounds[c+1]). It returns nil when the window is not worth
// two goroutines (less than two chunks), or a body is missing (the
// sequential loop then reports it).
func (ix *Index) renderChunks(src BodySource, size int) []int {
	bounds := []int{0}
	n := 0
	for k, w := range ix.wins {
		for _, i := range [2]int32{w.n, w.edit} {
			if i < 0 {
				continue
			}
			b, err := src.Body(ix.nodes[i].ref)
			if err != nil {
				return nil
			}
			n += len(b)
		}
		if n >= size {
			bounds, n = append(bounds, k+1), 0
		}
	}
	if n > 0 {
		bounds = append(bounds, len(ix.wins))
	}
	if len(bounds) < 3 {
		return nil
	}
	return bounds
}

// chunkOut is a chunk the helper rendered: each message preceded by a
// comma, or the error that stopped it.
type chunkOut struct {
	buf *bytes.Buffer
	err error
}

// writeMessagesOnTwo writes the context's messages to w as writeMessages
// would, rendering the odd chunks (bounds: renderChunks) on a second
// goroutine. src must be safe for concurrent use (a *File: its bodies are
// in memory and never change).
func (ix *Index) writeMessagesOnTwo(w *bufio.Writer, src BodySource, bounds []int) error {
	chunks := len(bounds) - 1
	done := make(chan chunkOut, 2)
	free := make(chan *bytes.Buffer, 2)
	free <- new(bytes.Buffer)
	free <- new(bytes.Buffer)
	quit := make(chan struct{})
	// render renders the odd chunks into the buffers free gives it, each
	// message after a comma (the writer drops the context's first).
	render := func() {
		var msgs []json.RawMessage
		for c := 1; c < chunks; c += 2 {
			var buf *bytes.Buffer
			select {
			case buf = <-free:
			case <-quit:
				return
			}
			buf.Reset()
			first := false
			var err error
			msgs, err = ix.writeMessages(buf, src, bounds[c], bounds[c+1], msgs, &first)
			done <- chunkOut{buf, err} // never blocks: as many slots as buffers
			if err != nil {
				return
			}
		}
	}
	h := newHelpers()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(quit)
	wg.Go(func() { h.run(render) })
	first := true
	var msgs []json.RawMessage
	for c := 0; c < chunks; c++ {
		if c%2 == 0 {
			var err error
			if msgs, err = ix.writeMessages(w, src, bounds[c], bounds[c+1], msgs, &first); err != nil {
				return err
			}
			continue
		}
		var r chunkOut
		select {
		case r = <-done:
		case <-h.faulted:
			h.rethrow() // the bodies faulted under the helper (helpers)
		}
		if r.err != nil {
			return r.err
		}
		b := r.buf.Bytes()
		if first && len(b) > 0 {
			b, first = b[1:], false
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		free <- r.buf
	}
	return nil
}

// concurrentBodies reports whether src may be asked for bodies by two
// goroutines at once: a *File, whose bodies are in memory and never change.
func concurrentBodies(src BodySource) bool {
	_, ok := src.(*File)
	return ok
}
