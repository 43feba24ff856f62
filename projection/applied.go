package projection

import (
	"slices"
)

// Applied is a catalog entry's Src: for each stream, the sequence of the
// session's last event applied, sorted by stream. It is a slice, not a
// Src map, because every session holds one with one or two streams: a
// small map costs ~260 bytes, the slice 24 a stream (2.5 MB of an idle
// daemon's heap with 10,000 sessions, docs/PERFORMANCE.md). In JSON it is
// the object the map was, keys sorted, so the catalog in the bucket and
// as served is unchanged.
type Applied []StreamSeq

// StreamSeq is one stream's position.
type StreamSeq struct {
	Stream string
	Seq    uint64
}

// Get is the stream's sequence, 0 for none.
func (a Applied) Get(stream string) uint64 {
	if i, ok := findSorted(a, stream, streamOf); ok {
		return a[i].Seq
	}
	return 0
}

func streamOf(e StreamSeq) string { return e.Stream }

// set records the stream's sequence; a new stream's name is nm's copy
// (stream may be a substring of a message the entry must not keep alive).
func (a *Applied) set(stream string, seq uint64, nm *names) {
	i, ok := findSorted(*a, stream, streamOf)
	if ok {
		(*a)[i].Seq = seq
		return
	}
	*a = slices.Insert(*a, i, StreamSeq{Stream: nm.get(stream), Seq: seq})
}

// Src is a copy as a map, the form rebuilds and views take.
func (a Applied) Src() Src {
	out := make(Src, len(a))
	for _, e := range a {
		out[e.Stream] = e.Seq
	}
	return out
}

// MarshalJSON writes the object {"stream": seq, ...}, keys sorted; {}
// when empty, as the entry's map never was nil.
func (a Applied) MarshalJSON() ([]byte, error) {
	return marshalSorted(a, func(e StreamSeq) (string, any) { return e.Stream, e.Seq })
}

// UnmarshalJSON reads the object MarshalJSON writes (or null: nothing
// applied).
func (a *Applied) UnmarshalJSON(data []byte) error {
	out, err := unmarshalSorted(data, "applied positions", func(s string, seq uint64) StreamSeq { return StreamSeq{s, seq} }, streamOf)
	if err != nil {
		return err
	}
	*a = out
	return nil
}
