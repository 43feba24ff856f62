package session

// startNode is where pi's buildSessionPath starts for a leaf id: nothing
// for null, the indexed entry for a known truthy id, else the last entry of
// the list (an id-less or falsy-id leaf). -1 means an empty path.
func (t *Tree) startNode(leaf ID, hasLeaf bool) int32 {
	if !hasLeaf || leaf.kind == idNull || len(t.nodes) == 0 {
		return -1
	}
	if leaf.truthy() && leaf.mapKey() {
		if i, ok := t.index[leaf]; ok {
			return i
		}
	}
	return int32(len(t.nodes) - 1)
}

// parentOf resolves a node's parent the way buildSessionPath does: only a
// truthy parentId is followed, through the id index.
func (t *Tree) parentOf(i int32) int32 {
	p := t.nodes[i].parent
	if !p.truthy() || !p.mapKey() {
		return -1
	}
	if j, ok := t.index[p]; ok {
		return j
	}
	return -1
}

// pathFrom returns the path root → start. A path longer than the number of
// entries must revisit one, so it loops: pi would spin until its heap is
// exhausted; this reports the entry where the walk noticed.
func (t *Tree) pathFrom(start int32) ([]int32, error) {
	if start < 0 {
		return nil, nil
	}
	var path []int32
	for i := start; i >= 0; i = t.parentOf(i) {
		if len(path) > len(t.nodes) {
			return nil, &CycleError{ID: t.nodes[i].id}
		}
		path = append(path, i)
	}
	for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
		path[a], path[b] = path[b], path[a]
	}
	return path, nil
}
