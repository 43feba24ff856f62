// Package metrics builds Prometheus metrics that read a component's own
// counters when scraped, so /metrics and `pisyncd status` report the same
// numbers and no component keeps a second copy.
package metrics

import "github.com/prometheus/client_golang/prometheus"

// Counter is pisyncd_<name>, a counter whose value is f().
func Counter(name, help string, f func() int64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "pisyncd", Name: name, Help: help},
		func() float64 { return float64(f()) })
}

// Gauge is pisyncd_<name>, a gauge whose value is f().
func Gauge(name, help string, f func() int64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "pisyncd", Name: name, Help: help},
		func() float64 { return float64(f()) })
}

// Bool is 1 when f() is true, else 0.
func Bool(f func() bool) func() int64 {
	return func() int64 {
		if f() {
			return 1
		}
		return 0
	}
}
