package projection

import (
	"math"
	"slices"

	"github.com/pisyncd/pisyncd/eventlog"
)

// lineLocs records where this machine's own lines sit in its session
// files: for every line of PI_LOCAL the tree holds, the file (relative to
// the sessions root), the offset just past its '\n' (Pi-Off), its length
// and its sha-256. A context query reads the window's bodies there
// (filebodies.go) instead of from the store, and checks each against its
// sha: the file is only a faster copy, never trusted.
//
// Lines of other machines (PI_ALL) have no entry: the replicator's copy of
// them sits at offsets nothing records, so their bodies come from the
// store.
//
// The slices are only appended to, in stream order (so seqs is sorted);
// a query takes a copy of the headers under the session's lock and reads
// the entries below their length without it.
type lineLocs struct {
	seqs  []uint64
	ends  []int64
	lens  []uint32
	shas  [][32]byte
	files []uint16 // index in names
	names []string
}

// lineLoc is one line's place.
type lineLoc struct {
	file string
	end  int64 // offset just past the line's '\n'
	n    int64 // the line's bytes, without its '\n'
	sha  [32]byte
}

// add records ev's line when it is one of this machine's, with a place.
func (l *lineLocs) add(ev *eventlog.Event) {
	if ev.Stream != eventlog.LocalStream || ev.File == "" || ev.Op != "" ||
		uint64(len(ev.Raw)) > math.MaxUint32 || ev.Off < int64(len(ev.Raw))+1 {
		return
	}
	if n := len(l.seqs); n > 0 && l.seqs[n-1] >= ev.Seq {
		return // not in stream order: left to the store
	}
	f := -1
	if n := len(l.names); n > 0 && l.names[n-1] == ev.File {
		f = n - 1
	} else if f = slices.Index(l.names, ev.File); f < 0 {
		if len(l.names) > math.MaxUint16 {
			return
		}
		f = len(l.names)
		l.names = append(l.names, ev.File)
	}
	l.seqs = append(l.seqs, ev.Seq)
	l.ends = append(l.ends, ev.Off)
	l.lens = append(l.lens, uint32(len(ev.Raw)))
	l.shas = append(l.shas, ev.Sha)
	l.files = append(l.files, uint16(f))
}

// find is the place of the PI_LOCAL line at seq.
func (l *lineLocs) find(seq uint64) (lineLoc, bool) {
	i, ok := slices.BinarySearch(l.seqs, seq)
	if !ok {
		return lineLoc{}, false
	}
	return lineLoc{file: l.names[l.files[i]], end: l.ends[i], n: int64(l.lens[i]), sha: l.shas[i]}, true
}
