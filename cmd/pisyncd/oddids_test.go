package main

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// TestOddIDsReplicate: entry ids a NATS header cannot carry as they are
// (a JSON "\r\n" inside, white space at an end) replicate like any other,
// with the lines below them, before and after a restart of the copy's
// machine (which indexes its file anew). Until 2026-12-07 every other
// machine refused them (their headers disagreed with their lines) and
// every line below them (a files probe: 4 of 8 lines copied).
func TestOddIDsReplicate(t *testing.T) {
	e := startHostile(t, nil)
	sid := "0199d000-0000-7000-8000-0000000000dd"
	p := writeSession(t, e.ann, sid, 1) // 0199-0
	crlf, padded := "x\r\nPi-Sha: evil", " padded\t"
	appendLine(t, p, msgLine(crlf, "0199-0", "below a plain id"))
	appendLine(t, p, msgLine(padded, crlf, "below the CRLF id"))
	appendLine(t, p, msgLine("last", padded, "below the padded id"))
	// Ids pi keeps apart that a trimmed form would merge, and one that
	// begins with a quote.
	appendLine(t, p, msgLine("dup", "last", "dup"))
	appendLine(t, p, msgLine("dup ", "dup", "dup and a space"))
	appendLine(t, p, msgLine("x  Pi-Sha: evil", "dup ", "the CRLF id with spaces"))
	appendLine(t, p, msgLine(`"q"`, "x  Pi-Sha: evil", "a quoted id"))
	appendLine(t, p, msgLine("end", `"q"`, "below them"))
	waitSecFile(t, e.bob, sid, 10, 30*time.Second)

	e.bob.stop()
	e.bob.start()
	appendLine(t, p, msgLine("branch", crlf, "a branch below the CRLF id, after bob's restart"))
	waitSecFile(t, e.bob, sid, 11, 30*time.Second)
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(secPath(e.bob, sid))
	if !bytes.Equal(a, b) {
		t.Errorf("bob's copy differs from ann's file:\n%s\nwant\n%s", b, a)
	}
	if st, err := e.bob.status(); err != nil || st.Downloader.Rejected != 0 || st.Replicator.Refused != 0 || st.Replicator.Collisions != 0 {
		t.Errorf("bob rejected %d, refused %d, collisions %d (%v)", st.Downloader.Rejected, st.Replicator.Refused, st.Replicator.Collisions, err)
	}
}
