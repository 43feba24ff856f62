package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestHostileNodeIDOfAnother: a teammate runs a daemon with another
// node's id (ann's) and a key of its own (eve's). Both stay linked to the
// hub: a leaf's server name holds its key, so the hub takes the two for
// two servers. Before, it took eve's for a second connection of ann's and
// closed one of them every few seconds, for as long as eve liked, and ann's
// log told ann to change her id.
func TestHostileNodeIDOfAnother(t *testing.T) {
	h := startSecureHub(t)
	annSeed, eveSeed := h.addNode("ann", "t1"), h.addNode("eve", "t1")
	h.run()
	ca := filepath.Join(h.certs, "ca.pem")
	ann := newSecureStation(t, h, "ann", annSeed, ca)
	waitUntil(t, 30*time.Second, func() (bool, string) { return ann.d.srv.HubLinked(), "ann not linked" })
	link := ann.d.srv.HubLink()

	eve := newSecureStation(t, h, "ann", eveSeed, ca)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		return eve.d.srv.HubLinked(), "eve, as ann, not linked"
	})
	if got := ann.d.srv.HubLink(); got != link {
		t.Errorf("ann's leaf connection was replaced (%s, was %s) when eve linked as ann", got, link)
	}
	// ann's lines still go: a session of hers reaches the hub.
	writeSession(t, ann, "0199f000-0000-7000-8000-0000000nodeid", 2)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		st, err := ann.status()
		return err == nil && st.Forwarder != nil && st.Forwarder.Forwarded >= 3 && ann.d.srv.HubLink() == link,
			fmt.Sprintf("ann: forwarder %+v, link %s (was %s)", st.Forwarder, ann.d.srv.HubLink(), link)
	})
}
