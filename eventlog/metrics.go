package eventlog

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pisyncd/pisyncd/internal/metrics"
)

// Collectors returns the forwarder's Prometheus metrics.
func (f *Forwarder) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("hub_lines_forwarded_total", "Lines copied from PI_LOCAL to the hub's PI_HUB.", f.forwarded.Load),
		metrics.Gauge("hub_forwarder_connected", "1 while the forwarder reaches the hub.", metrics.Bool(f.link.Load)),
		metrics.Gauge("hub_forwarder_sessions_waiting", "Sessions whose next line (an image) waits for the hub to take an atomic batch.", f.waiting.Load),
	}
}

// Collectors returns the downloader's Prometheus metrics.
func (d *Downloader) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Counter("hub_lines_downloaded_total", "Messages copied from the hub's PI_HUB into PI_ALL.", d.copied.Load),
		metrics.Gauge("hub_downloader_connected", "1 while the downloader reaches the hub.", metrics.Bool(d.link.Load)),
		metrics.Gauge("hub_downloader_sessions_held", "Sessions of other nodes whose lines are held until this machine has the team key they are sealed with.", d.held.Load),
	}
}

// Collectors returns the end-to-end encryption's Prometheus metrics, read
// from Status (which never waits for a seal under way).
func (c *Crypt) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		metrics.Gauge("encryption_team_keys", "Keys of the team keyring this machine seals and opens with; 0 without one.", func() int64 { return int64(c.Status().Keys) }),
		metrics.Gauge("encryption_keyring_error", "1 while the team keyring file is there but cannot be read (its mode, a damaged file): status says why.", metrics.Bool(func() bool { return c.Status().KeyError != "" })),
		metrics.Gauge("encryption_forwarding_waits", "1 while forwarding to the hub waits for a team key (PISYNC_ENCRYPT=on without one, or a keyring that cannot be read).", metrics.Bool(func() bool { return c.Status().ForwardWaiting != "" })),
	}
}
