package embedded

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// rawReader connects to the listener as the reader over plain TCP, and
// then never reads: what a reader asks for piles up in the server.
func rawReader(t *testing.T, s *Server) net.Conn {
	t.Helper()
	cc := readCreds(t, s.CredentialsFile())
	kp, err := nkeys.FromSeed(mustRead(t, cc.Nkey))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	c, err := net.Dial("tcp", strings.TrimPrefix(cc.URL, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("INFO: %q %v", line, err)
	}
	var info struct{ Nonce string }
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &info); err != nil {
		t.Fatal(err)
	}
	sig, _ := kp.Sign([]byte(info.Nonce))
	connect, _ := json.Marshal(map[string]any{"nkey": pub, "sig": base64.RawURLEncoding.EncodeToString(sig),
		"verbose": false, "pedantic": false, "protocol": 1, "headers": true, "no_responders": true})
	fmt.Fprintf(c, "CONNECT %s\r\nPING\r\n", connect)
	if line, err = r.ReadString('\n'); err != nil || line != "PONG\r\n" {
		t.Fatalf("connect: %q %v", line, err)
	}
	return c
}

// TestReaderUnreadRepliesBounded: readers that ask for the same stored
// messages again and again and never read the answers do not grow the
// server's memory without end: the read relay answers one request at a
// time and drops what waits past its queue, and an answer piles up only in
// the reader's own connection, which the server closes at max pending.
// The daemon's own reads go on meanwhile, and a reader is answered after.
// (With the streams' direct gets exported to the readers, the heap grew by
// 4.3 GiB in this test: nats-server queues a direct get's answers without
// a bound.)
func TestReaderUnreadRepliesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("fills the server's buffers")
	}
	s := startServer(t, listenConfig(t))
	relay := runRelay(t, s)
	js, _ := jetstream.New(connect(t, s))
	localStream(t, js)
	line := []byte(strings.Repeat("x", 8<<10))
	for range 128 { // 1 MiB stored
		if _, err := js.Publish(testCtx(t), "pi.evt.n.a", line); err != nil {
			t.Fatal(err)
		}
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// The peak is sampled while the server answers.
	peak := make(chan uint64)
	stop := make(chan struct{})
	go func() {
		var p uint64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			p = max(p, m.HeapInuse)
			select {
			case <-stop:
				peak <- p
				return
			case <-tick.C:
			}
		}
	}()

	var pubs strings.Builder
	for i := range 128 {
		req := fmt.Sprintf(`{"seq":%d}`, i+1)
		if i%16 == 0 { // and the whole stream, in one answer
			req = `{"seq":1,"batch":128,"next_by_subj":"pi.evt.>"}`
		}
		fmt.Fprintf(&pubs, "PUB $JS.API.DIRECT.GET.PI_LOCAL _INBOX.x %d\r\n%s\r\n", len(req), req)
	}
	pub := pubs.String()
	var conns []net.Conn
	for range readMaxConns {
		c := rawReader(t, s)
		fmt.Fprintf(c, "SUB _INBOX.x 1\r\n")
		conns = append(conns, c)
	}
	// Each asks for 96 × 9 MiB (8 whole streams and 120 messages a
	// round), far more than the server's max pending.
	for range 96 {
		for _, c := range conns {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, pub) // fails once the server closed it
		}
	}
	// The daemon's own reads are not held up.
	if _, err := js.Stream(testCtx(t), "PI_LOCAL"); err != nil {
		t.Fatalf("the daemon's stream info during the attack: %v", err)
	}
	// The readers stop; a reader that reads is answered after whatever
	// the relay still had waiting.
	for _, c := range conns {
		c.Close()
	}
	var nc *nats.Conn
	for {
		var err error
		if nc, err = connectReader(t, s); err == nil {
			break // the server has seen the readers go
		}
		runtime.Gosched()
	}
	// Its request may be dropped while the queue is still full of the
	// readers' last ones: it asks again, as a reader does after a timeout.
	var m *nats.Msg
	var err error
	for range 30 {
		if m, err = nc.Request("$JS.API.DIRECT.GET.PI_LOCAL", []byte(`{"seq":1}`), time.Second); err == nil {
			break
		}
	}
	if err != nil || len(m.Data) != len(line) {
		t.Fatalf("direct get after the attack: %v", err)
	}
	close(stop)
	p := <-peak
	grew := int64(p) - int64(before.HeapInuse)
	t.Logf("heap in use: %d MiB before, peak %d MiB (+%d MiB) with %d readers that asked for up to %d MiB each and read nothing; %d requests dropped",
		before.HeapInuse>>20, p>>20, grew>>20, len(conns), 96*9, relay.Stats().Dropped)
	if bound := int64(512 << 20); grew > bound {
		t.Errorf("the server's heap grew by %d MiB, want at most %d MiB", grew>>20, bound>>20)
	}
}
