package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Two catalog fields are small maps kept as slices sorted by key (Applied,
// NodeFiles): every session holds one, and a small map costs ~10 times
// the slice. In JSON they are the objects the maps were, keys sorted, so
// the catalog in the bucket and as served did not change with them.

// findSorted is the index of key in es (sorted by key(e)), or where it
// would go.
func findSorted[E any](es []E, k string, key func(E) string) (int, bool) {
	return slices.BinarySearchFunc(es, k, func(e E, k string) int { return strings.Compare(key(e), k) })
}

// marshalSorted writes es as a JSON object of kv's keys and values, in
// es's order.
func marshalSorted[E any](es []E, kv func(E) (string, any)) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range es {
		if i > 0 {
			b.WriteByte(',')
		}
		k, v := kv(e)
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// unmarshalSorted reads a JSON object of V values as elements made by mk,
// sorted by key; null reads as nil. what names the field in an error.
func unmarshalSorted[V, E any](data []byte, what string, mk func(string, V) E, key func(E) string) ([]E, error) {
	var m map[string]V
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if m == nil {
		return nil, nil
	}
	out := make([]E, 0, len(m))
	for k, v := range m {
		out = append(out, mk(k, v))
	}
	slices.SortFunc(out, func(a, b E) int { return strings.Compare(key(a), key(b)) })
	return out, nil
}
