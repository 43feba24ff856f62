package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	if i, ok := f.find(node); ok {
		return f[i].File
	}
	return ""
}

func (f NodeFiles) find(node string) (int, bool) {
	return slices.BinarySearchFunc(f, node, func(e NodeFile, n string) int { return strings.Compare(e.Node, n) })
}

// set records the node's file and returns the string kept: the one
// already there when unchanged, else a copy of file (which may be a
// substring of a message the entry must not keep alive).
func (f *NodeFiles) set(node, file string) string {
	i, ok := f.find(node)
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
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range f {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.Node)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.File)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object MarshalJSON writes (or null: no files).
func (f *NodeFiles) UnmarshalJSON(data []byte) error {
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("node files: %w", err)
	}
	if m == nil {
		*f = nil
		return nil
	}
	out := make(NodeFiles, 0, len(m))
	for n, file := range m {
		out = append(out, NodeFile{Node: n, File: file})
	}
	slices.SortFunc(out, func(a, b NodeFile) int { return strings.Compare(a.Node, b.Node) })
	*f = out
	return nil
}
