package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address (127.0.0.1:port) that nothing listened
// on a moment ago, for a server a test starts later (a hub, a listener given
// by address). A port the system hands out for ":0" is one of its ephemeral
// ports, which every outgoing connection of the machine draws from too: in
// the time between the check and the server's listen, a connection of a test
// running beside it could take it ("address already in use", seen in CI).
// So the port is drawn at random from below the ephemeral range, where only
// listeners are, and one this process handed out is not handed out again.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	lo, hi := listenerPorts()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if !takePort(port) {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // someone listens there
		}
		l.Close()
		return addr
	}
	tb.Fatalf("no free port in %d-%d", lo, hi)
	return ""
}

var ports = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

func takePort(p int) bool {
	ports.Lock()
	defer ports.Unlock()
	if ports.given[p] {
		return false
	}
	ports.given[p] = true
	return true
}

// listenerPorts is the range FreeAddr draws from: from 20000 to the first
// ephemeral port (Linux says which; 32768 is its default and, with 49152,
// the usual start elsewhere).
func listenerPorts() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lo+1000 {
				hi = n
			}
		}
	}
	return lo, hi
}
