//go:build docker

package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// hubCaughtUp waits until every replica of PI_HUB is current with lag 0,
// asking hub1's client listener on the private network (reachable from the
// host on Linux; elsewhere the figure is skipped). It returns the time from
// since.
func (s *stack) hubCaughtUp(since time.Time) (time.Duration, bool) {
	s.t.Helper()
	url := "nats://" + s.ip("hub1") + ":4222"
	nc, err := nats.Connect(url, nats.Timeout(3*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		s.t.Logf("hub1's client listener %s is not reachable from the host (%v): no replica figure", url, err)
		return 0, false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	waitFor(s.t, 2*time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "PI_HUB")
		if err != nil {
			return false, err.Error()
		}
		info := st.CachedInfo()
		if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return false, fmt.Sprintf("PI_HUB cluster %+v", info.Cluster)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline || r.Lag != 0 {
				return false, fmt.Sprintf("PI_HUB leader %s, replica %s current=%v offline=%v lag=%d", info.Cluster.Leader, r.Name, r.Current, r.Offline, r.Lag)
			}
		}
		return true, ""
	})
	return time.Since(since), true
}
