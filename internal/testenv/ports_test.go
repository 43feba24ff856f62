package testenv

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddr: addresses below the ephemeral range, never one twice, each
// free to listen on.
func TestFreeAddr(t *testing.T) {
	lo, hi := listenerPorts()
	seen := map[string]bool{}
	for range 50 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(p); n < lo || n >= hi {
			t.Errorf("%s: port outside %d-%d", addr, lo, hi)
		}
		if seen[addr] {
			t.Errorf("%s handed out twice", addr)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		l.Close()
	}
}
