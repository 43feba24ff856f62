package eventlog_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pisyncd/pisyncd/admit"
	"github.com/pisyncd/pisyncd/eventlog"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
)

// deadHost is the downloader's consumer on a hub node that is down: a
// question about it is never answered.
type deadHost struct{ jetstream.Consumer }

func (deadHost) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestDownloaderConsumerOnADeadNode: on a watched link, a question about
// the consumer left unanswered while the hub answers for its stream is a
// consumer whose hub node is down (a cluster places the one replica on any
// node of the stream's): the copy starts over, with a consumer made anew.
// With the hub not answering for the stream either, it is a slow link: no
// news. (Before, both were no news, and a workstation of a three-node
// hub copied nothing while the node that held its consumer was down, its
// link up and its status saying nothing wrong: a cluster probe,
// 2026-12-07.)
func TestDownloaderConsumerOnADeadNode(t *testing.T) {
	var hold sync.RWMutex // held: nothing comes down the link, which stays up
	_, ws, all := hubAndLeafThrough(t, func(leaf string) string { return heldProxy(t, leaf, &hold) })
	nc, err := ws.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := eventlog.NewDownloader(nc, all, embedded.HubDomain, eventlog.DownloaderOptions{Admit: admit.New("w1", admit.Limits{}, all, nil), HubLink: ws.HubLink})
	if err != nil {
		t.Fatal(err)
	}
	err = eventlog.CheckConsumer(d, context.Background(), deadHost{}, 0)
	if err == nil || !strings.Contains(err.Error(), "hub node that held it is down") {
		t.Errorf("a consumer that never answers, where its stream does: %v, want the copy started over", err)
	}
	// A link that carries nothing down for now, as a slow one behind a
	// backlog: no news.
	hold.Lock()
	err = eventlog.CheckConsumer(d, context.Background(), deadHost{}, 0)
	hold.Unlock()
	if err != nil {
		t.Errorf("with the stream not answering either: %v, want no news", err)
	}
}

// heldProxy relays TCP to target, from a listener of its own whose
// address it returns; while hold is held, nothing goes from target back.
func heldProxy(t *testing.T, target string, hold *sync.RWMutex) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			closeBoth := func() { c.Close(); u.Close() }
			conns.Go(func() { io.Copy(u, c); closeBoth() })
			conns.Go(func() {
				defer closeBoth()
				buf := make([]byte, 32<<10)
				for {
					n, err := u.Read(buf)
					if n > 0 {
						hold.RLock()
						_, werr := c.Write(buf[:n])
						hold.RUnlock()
						if werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			context.AfterFunc(t.Context(), closeBoth)
		}
	})
	return ln.Addr().String()
}
