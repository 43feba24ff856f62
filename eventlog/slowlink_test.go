package eventlog_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// slowProxy forwards TCP connections to target, carrying what the client
// sends at most rate bytes a second (an uplink) and the replies at full
// speed. It returns its address; it stops at the end of the test.
func slowProxy(tb testing.TB, target string, rate int) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, t)
			mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(c, t)
				c.Close()
			}()
			go func() {
				defer wg.Done()
				defer t.Close()
				buf := make([]byte, 4<<10)
				start, sent := time.Now(), 0
				for {
					n, err := c.Read(buf)
					if n > 0 {
						sent += n
						// The rate: what was sent so far is due no
						// sooner than sent/rate after the start.
						time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(rate))))
						if _, werr := t.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestForwardOverSlowLink: a batch that the uplink needs longer to carry
// than the publisher's timeout is still stored, at the first attempt: the
// server answers only once all of it has arrived, so the wait allows for a
// slow link's time. With the timeout alone it failed every time it was
// sent, and a workstation on a slow uplink forwarded a backlog of images
// by failures and retries, if at all.
func TestForwardOverSlowLink(t *testing.T) {
	const rate = 256 << 10 // bytes a second
	_, ws, _ := hubAndLeafThrough(t, func(leaf string) string { return slowProxy(t, leaf, rate) })
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hub, err := jetstream.NewWithDomain(nc, embedded.HubDomain)
	if err != nil {
		t.Fatal(err)
	}
	// 640 KiB in one batch (more lines than go one by one): 2.5 s of
	// the link, against a timeout of 1 s for a server that does not
	// answer.
	lines := mkLines(20, 32<<10, "slow")
	pub := eventlog.NewPublisher(nc, hub, time.Second)
	ctx := context.Background()
	start := time.Now()
	last, n, err := pub.Publish(ctx, eventlog.UpSubject("w1", "s1"), 0, lines)
	if err != nil {
		t.Fatalf("stored %d of %d lines after %s: %v", n, len(lines), time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("%d lines, %d KiB, stored in %s", n, n*32, time.Since(start).Round(time.Millisecond))
	if last == 0 || n != len(lines) {
		t.Fatalf("stored %d of %d lines, last sequence %d", n, len(lines), last)
	}
}
