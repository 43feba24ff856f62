package search

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/blevesearch/bleve/v2/index/scorch"
)

// A segment file damaged on disk (a bad block, a stray write, a copy cut
// short) is read by bleve without a check: searches answer from it, wrong
// or failing, and a merge that reads it fails, which scorch's merger
// retries at once and for ever, each attempt a new file: an erase on such
// an index wrote 866 MB in 100 s (a probe, 2026-12-06). Every segment
// file ends with the CRC-32 of all its bytes before (zap's footer). The
// worker checks them when it starts and whenever the index reports a
// failure (Suspect), and makes a damaged index again from the streams,
// which hold every line it was made from.

// Damage checks every segment file the index reads from against its CRC.
// It returns what is wrong with the first damaged one, "" when none is.
// It reads every file once; ctx ends it early.
func (ix *Index) Damage(ctx context.Context) (_ string, err error) {
	if err := ix.rlock(); err != nil {
		return "", err
	}
	defer ix.runlock(&err)
	adv, err := ix.idx.Advanced()
	if err != nil {
		return "", fmt.Errorf("search: check the index: %w", err)
	}
	sc, ok := adv.(*scorch.Scorch)
	if !ok {
		return "", fmt.Errorf("search: check the index: not scorch (%T)", adv)
	}
	// The snapshot holds its segments: none is removed while it is read.
	r, err := sc.Reader()
	if err != nil {
		return "", fmt.Errorf("search: check the index: %w", err)
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return "", fmt.Errorf("search: check the index: unexpected reader %T", r)
	}
	for _, seg := range snap.Segments() {
		p, ok := seg.Segment().(interface{ Path() string })
		if !ok {
			continue // in memory, not yet a file
		}
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if why, err := segmentDamage(ctx, p.Path()); why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// segmentDamage checks one segment file's CRC, read from the file itself
// (not through the index's mapping, whose pages would stay resident).
func segmentDamage(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("search: check %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("search: check %s: %w", filepath.Base(path), err)
	}
	if info.Size() < 4 {
		return fmt.Sprintf("segment %s holds %d bytes, less than its checksum", filepath.Base(path), info.Size()), nil
	}
	h := crc32.NewIEEE()
	if _, err := io.CopyN(h, ctxReader{ctx, f}, info.Size()-4); err != nil {
		return "", fmt.Errorf("search: check %s: %w", filepath.Base(path), err)
	}
	var want [4]byte
	if _, err := io.ReadFull(f, want[:]); err != nil {
		return "", fmt.Errorf("search: check %s: %w", filepath.Base(path), err)
	}
	if got := h.Sum32(); got != binary.BigEndian.Uint32(want[:]) {
		return fmt.Sprintf("segment %s is damaged: its checksum is %08x, its bytes' %08x", filepath.Base(path), binary.BigEndian.Uint32(want[:]), got), nil
	}
	return "", nil
}

// ctxReader reads r until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
