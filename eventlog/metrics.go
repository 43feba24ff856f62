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
