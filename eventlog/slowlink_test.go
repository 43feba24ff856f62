package eventlog_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/internal/testenv"
)

// slowProxy forwards TCP connections to target, carrying what the client
// sends at most up bytes a second (an uplink) and the replies at most down
// bytes a second (a downlink); 0 is full speed. It returns its address; it
// stops at the end of the test.
func slowProxy(tb testing.TB, target string, up, down int) string {
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
				defer c.Close()
				throttle(c, t, down)
			}()
			go func() {
				defer wg.Done()
				defer t.Close()
				throttle(t, c, up)
			}()
		}
	}()
	return l.Addr().String()
}

// throttle copies from src to dst at most rate bytes a second (0: at full
// speed) until either fails.
func throttle(dst io.Writer, src io.Reader, rate int) {
	if rate == 0 {
		io.Copy(dst, src)
		return
	}
	buf := make([]byte, 4<<10)
	var due time.Time
	for {
		n, err := src.Read(buf)
		if n > 0 {
			// Each chunk takes n/rate of the link after the one before;
			// an idle link saves up no time for a burst.
			if now := time.Now(); due.Before(now) {
				due = now
			}
			due = due.Add(time.Duration(n) * time.Second / time.Duration(rate))
			time.Sleep(time.Until(due))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestForwardOverSlowLink: a batch that the uplink needs longer to carry
// than the publisher's timeout is still stored, at the first attempt: the
// server answers only once all of it has arrived, so the wait allows for a
// slow link's time. With the timeout alone it failed every time it was
// sent, and a workstation on a slow uplink forwarded a backlog of images
// by failures and retries, if at all.
func TestForwardOverSlowLink(t *testing.T) {
	nc, hub := hubOverUplink(t, 256<<10)
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

// TestDownloadOverSlowLink: a line the downlink needs longer to carry
// than the downloader waits in silence before it asks the hub how far its
// consumer got (30 s), and than two of the hub's heartbeats, is still
// copied, at the first attempt. The hub's answer waits behind the line;
// unanswered, or answered that the line was sent, it is no reason to start
// over on a link that has not changed: that sent the line again behind the
// first copy at every attempt, and a workstation on a link under about 8
// KiB/s never got an image (under 64 KiB/s, with the downloader's earlier
// 5 s watchdog and 2 s heartbeat).
func TestDownloadOverSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("carries a chunk over a link for longer than the downloader's 30 s of silence")
	}
	const rate = 6 << 10 // bytes a second: the line's one chunk (240 KiB) takes 40 s
	hubJS, ws, all := hubAndLeafThrough(t, func(leaf string) string { return slowProxy(t, leaf, 0, rate) })
	pub := eventlog.NewPublisher(hubJS.Conn(), hubJS, 10*time.Second)
	line := imageLine("big", 1, 180<<10)
	if _, _, err := pub.Publish(context.Background(), eventlog.UpSubject("n2", "s1"), 0, []eventlog.Line{line}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	defer runDownloader(t, ws, all, nil, nil)()
	waitCountWithin(t, all, 1, 120*time.Second)
	t.Logf("a %d KiB line copied over %d KiB/s in %s", len(line.Raw)>>10, rate>>10, time.Since(start).Round(100*time.Millisecond))
}

// TestBatchOverCompressedSlowLink: an atomic batch of image lines crosses
// an uplink of 32 KiB/s. The workstation's server sends the hub s2 blocks
// of up to 1 MB (compressed or not, by the link's round trip), and the hub
// reads a message only once its block has arrived: here the batch's first
// chunk alone, then the other three in one block, 11 s later. With the server's default batch timeout
// (10 s between messages) the hub dropped the batch as incomplete at every
// attempt; the hub's configuration gives it a minute.
func TestBatchOverCompressedSlowLink(t *testing.T) {
	if testing.Short() {
		t.Skip("carries 600 KB over a link of 32 KiB/s")
	}
	nc, hub := hubOverUplink(t, 32<<10)
	var lines []eventlog.Line
	for i := range 2 {
		lines = append(lines, imageLine(fmt.Sprint("img", i), int64(i+1), 225<<10))
	}
	pub := eventlog.NewPublisher(nc, hub, 30*time.Second)
	start := time.Now()
	last, n, err := pub.Publish(context.Background(), eventlog.UpSubject("w1", "s1"), 0, lines)
	if err != nil || n != len(lines) {
		t.Fatalf("stored %d of %d lines after %s: %v", n, len(lines), time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("2 image lines (4 chunks) stored in %s, last sequence %d", time.Since(start).Round(time.Millisecond), last)
}

// hubOverUplink starts a hub and a workstation whose leaf link carries at
// most rate bytes a second toward the hub, and returns a connection to the
// workstation (closed at the end of the test) and the hub's JetStream
// through it.
func hubOverUplink(t *testing.T, rate int) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, ws, _ := hubAndLeafThrough(t, func(leaf string) string { return slowProxy(t, leaf, rate, 0) })
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	hub, err := jetstream.NewWithDomain(nc, embedded.HubDomain)
	if err != nil {
		t.Fatal(err)
	}
	return nc, hub
}

// imageLine is a message line carrying an image of size random bytes as
// pi writes it: base64, which the leaf link's compression cannot shrink
// much.
func imageLine(id string, srcSeq int64, size int) eventlog.Line {
	img := make([]byte, size)
	rand.Read(img)
	raw := fmt.Sprintf(`{"type":"message","id":%q,"image":%q}`, id, base64.StdEncoding.EncodeToString(img))
	return eventlog.NewLine([]byte(raw), id, "", "message", "f.jsonl", srcSeq)
}

// TestForwarderOverSlowUplink: a session of two images (600 KB, 19 s of
// an uplink of 32 KiB/s) is forwarded at the first attempt by a forwarder
// that watches the link. Without the watch it gives a batch the time of a
// one-megabit link (15 s here), gave up on it, asked the hub for its
// position behind the batch still on the link and failed again, and now
// and then sent the batch a second time.
func TestForwarderOverSlowUplink(t *testing.T) {
	if testing.Short() {
		t.Skip("carries 600 KB over a link of 32 KiB/s")
	}
	hubJS, ws, _ := hubAndLeafThrough(t, func(leaf string) string { return slowProxy(t, leaf, 32<<10, 0) })
	nc, local := localOn(t, ws, "w1")
	ctx := context.Background()
	if _, _, err := local.Publish(ctx, "s1", 0, []eventlog.Line{imageLine("img0", 0, 225<<10), imageLine("img1", 1, 225<<10)}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, logs := runWatchingForwarder(t, ws, nc, local)
	hub, err := hubJS.Stream(ctx, eventlog.HubStream)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 90*time.Second, func() (bool, string) {
		info, err := hub.Info(ctx)
		return err == nil && info.State.Msgs == 4, fmt.Sprintf("PI_HUB: %v, %+v", err, info)
	})
	t.Logf("two image lines (4 chunks) on the hub after %s", time.Since(start).Round(100*time.Millisecond))
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the forwarder failed on the way:\n%s", logs.String())
	}
}

// localOn connects to srv and opens node's PI_LOCAL on it, both closed
// with the test.
func localOn(t testing.TB, srv *embedded.Server, node string) (*nats.Conn, *eventlog.Local) {
	t.Helper()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	local, err := eventlog.OpenLocal(context.Background(), nc, node)
	if err != nil {
		t.Fatal(err)
	}
	return nc, local
}

// runWatchingForwarder runs a forwarder of local over nc that watches ws's
// hub link, until the test ends (a Run error fails it), and returns it
// with its log.
func runWatchingForwarder(t testing.TB, ws *embedded.Server, nc *nats.Conn, local *eventlog.Local) (*eventlog.Forwarder, *testenv.LogBuffer) {
	t.Helper()
	ctx := context.Background()
	state, err := eventlog.OpenState(ctx, local.JetStream())
	if err != nil {
		t.Fatal(err)
	}
	logs := new(testenv.LogBuffer)
	f, err := eventlog.NewForwarder(local, nc, embedded.HubDomain, state, logs.Logger())
	if err != nil {
		t.Fatal(err)
	}
	f.WatchLink(ws.HubLink)
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(fctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return f, logs
}
