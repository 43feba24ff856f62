package web

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"
)

// TestDiagOwner: the kernel's answer for this process's own connections,
// IPv4, IPv6 and an IPv4 client of a dual-stack listener, agrees with the
// tables; a pair of ends no socket has is not found. A kernel without
// NETLINK_SOCK_DIAG fails the test: socketOwner would still answer from
// the tables, but this machine's kernel has it.
func TestDiagOwner(t *testing.T) {
	for _, c := range []struct{ listen, dial string }{
		{"127.0.0.1:0", "127.0.0.1"},
		{"[::1]:0", "::1"},
		{"[::]:0", "127.0.0.1"}, // an IPv6 socket with a mapped address
	} {
		ln, err := net.Listen("tcp", c.listen)
		if err != nil {
			t.Logf("%s: %v", c.listen, err) // no IPv6 here
			continue
		}
		defer ln.Close()
		conn, err := net.Dial("tcp", net.JoinHostPort(c.dial, fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		l, r := conn.LocalAddr().(*net.TCPAddr), conn.RemoteAddr().(*net.TCPAddr)
		uid, ok, err := diagOwner(l, r)
		if err != nil || !ok || uid != os.Geteuid() {
			t.Errorf("%s → %s: the kernel says uid %d, %v, %v; want %d", l, r, uid, ok, err, os.Geteuid())
		}
		if tuid, tok := tableOwner(l, r); tok != ok || tuid != uid {
			t.Errorf("%s → %s: the tables say uid %d, %v; the kernel %d, %v", l, r, tuid, tok, uid, ok)
		}
		// No socket has these ends, but the listener is on the source's
		// address and port: the kernel's lookup falls back to it.
		gone, nowhere := &net.TCPAddr{IP: r.IP, Port: r.Port}, &net.TCPAddr{IP: l.IP, Port: 1}
		if uid, ok, err := diagOwner(gone, nowhere); ok || err != nil {
			t.Errorf("%s → %s: no such socket, and the kernel named uid %d (%v)", gone, nowhere, uid, err)
		}
	}
}

// BenchmarkSocketOwner: one question to the kernel against a read of the
// tables, with PISYNC_BENCH_CONNS (default 2,000) idle loopback
// connections open, as another user's program can hold them.
func BenchmarkSocketOwner(b *testing.B) {
	n := 2000
	if v := os.Getenv("PISYNC_BENCH_CONNS"); v != "" {
		fmt.Sscan(v, &n)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatalf("after %d connections: %v (ulimit -n?)", len(held), err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	l, r := held[n/2].LocalAddr().(*net.TCPAddr), held[n/2].RemoteAddr().(*net.TCPAddr)
	var diag, table time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, ok, _ := diagOwner(l, r); !ok {
			b.Fatal("the kernel did not answer")
		}
		t1 := time.Now()
		if _, ok := tableOwner(l, r); !ok {
			b.Fatal("not in the tables")
		}
		diag, table = diag+t1.Sub(t0), table+time.Since(t1)
	}
	b.ReportMetric(float64(diag.Microseconds())/float64(b.N), "µs/kernel")
	b.ReportMetric(float64(table.Microseconds())/float64(b.N), "µs/tables")
	b.ReportMetric(float64(table)/float64(diag), "tables/kernel")
}
