package projection

import (
	"slices"
	"strings"
)

// NodeFiles is, for each origin node of a session, its file there
// (relative to that node's sessions root), sorted by node. It is a slice,
// not a map, because every session holds one and nearly all have a
// single node: a one-entry map costs ~340 bytes, the slice 32 (3 MB of
// an idle daemon's heap with 10,000 sessions, docs/PERFORMANCE.md). In
// JSON it is the object the map was, keys sorted, so the catalog in the
// bucket and as served is unchanged.
type NodeFiles []NodeFile

// NodeFile is one node's file of a session.
type NodeFile struct {
	Node, File string
}

// Get is the node's file, "" if the session has none there.
func (f NodeFiles) Get(node string) string {
	if i, ok := findSorted(f, node, nodeOf); ok {
		return f[i].File
	}
	return ""
}

func nodeOf(e NodeFile) string { return e.Node }

// set records the node's file and returns the string kept: the one
// already there when unchanged, else a copy of file (which may be a
// substring of a message the entry must not keep alive).
func (f *NodeFiles) set(node, file string) string {
	i, ok := findSorted(*f, node, nodeOf)
	if ok {
		if (*f)[i].File != file {
			(*f)[i].File = strings.Clone(file)
		}
		return (*f)[i].File
	}
	*f = slices.Insert(*f, i, NodeFile{Node: node, File: strings.Clone(file)})
	return (*f)[i].File
}

// MarshalJSON writes the object {"node": "file", ...}, keys sorted.
func (f NodeFiles) MarshalJSON() ([]byte, error) {
	if f == nil {
		return []byte("null"), nil
	}
	return marshalSorted(f, func(e NodeFile) (string, any) { return e.Node, e.File })
}

// UnmarshalJSON reads the object MarshalJSON writes (or null: no files).
func (f *NodeFiles) UnmarshalJSON(data []byte) error {
	out, err := unmarshalSorted(data, "node files", func(n, file string) NodeFile { return NodeFile{n, file} }, nodeOf)
	if err != nil {
		return err
	}
	*f = out
	return nil
}
