package session

import (
	"encoding/json"
	"fmt"
)

// Migrations (spec §6) never touch the input. The Tree applies them to its
// metadata as lines arrive: version-1 entries get deterministic ids (see
// v1ID; pi's are random on every load, so any stable choice is as good) and
// a linear parent chain, and firstKeptEntryIndex becomes firstKeptEntryId.
// The v2 → v3 role rename is applied when messages are rendered. The
// functions here produce the migrated objects pi would write back.

// MigratedHeader returns the header as pi holds it after load: version set
// to 3 (in place, or appended as the last key) when migration ran.
func (t *Tree) MigratedHeader() (json.RawMessage, error) {
	if !t.Migrated() {
		return t.header, nil
	}
	fs, err := objectFields(t.header)
	if err != nil {
		return nil, fmt.Errorf("session: migrate header: %w", err)
	}
	return encodeFields(setField(fs, "version", json.RawMessage("3"))), nil
}

// MigratedEntries returns every entry (header excluded) as pi holds it
// after load-time migration. Unknown fields are kept byte for byte; only
// the fields the migration assigns are rewritten.
func (f *File) MigratedEntries() ([]json.RawMessage, error) {
	t := f.Tree
	out := make([]json.RawMessage, len(t.nodes))
	for i := range t.nodes {
		n := &t.nodes[i]
		raw, err := f.Body(n.ref)
		if err != nil {
			return nil, err
		}
		if !t.Migrated() || !isObject(raw) {
			out[i] = raw // arrays take pi's new id as a property JSON drops
			continue
		}
		fs, err := objectFields(raw)
		if err != nil {
			return nil, fmt.Errorf("session: migrate entry %d: %w", i, err)
		}
		if t.v1() {
			id, _ := n.id.MarshalJSON()
			parent, _ := n.parent.MarshalJSON()
			fs = setField(fs, "id", id)
			fs = setField(fs, "parentId", parent)
			if n.isType("compaction") && n.x != nil {
				if isNumberRaw(getField(fs, "firstKeptEntryIndex")) {
					var fk json.RawMessage
					if !n.x.firstKept.IsUndefined() {
						fk, _ = n.x.firstKept.MarshalJSON()
					}
					fs = setField(fs, "firstKeptEntryId", fk)
					fs = setField(fs, "firstKeptEntryIndex", nil)
				}
			}
		}
		if n.isType("message") {
			if m := getField(fs, "message"); isObject(m) {
				mfs, err := objectFields(m)
				if err == nil {
					if r, _ := rawString(getField(mfs, "role")); r == "hookMessage" {
						fs = setField(fs, "message", encodeFields(setField(mfs, "role", json.RawMessage(`"custom"`))))
					}
				}
			}
		}
		out[i] = encodeFields(fs)
	}
	return out, nil
}

// isNumberRaw reports whether raw is a JSON number (typeof "number").
func isNumberRaw(raw json.RawMessage) bool {
	raw = trimWS(raw)
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}
