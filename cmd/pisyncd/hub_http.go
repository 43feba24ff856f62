package main

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pisyncd/pisyncd/config"
	"github.com/pisyncd/pisyncd/eventlog/embedded"
	"github.com/pisyncd/pisyncd/web"
)

// The hub's own /healthz and /metrics (PISYNC_HUB_HTTP_ADDR). A hub runs as
// a service, and what watches it asks whether it is up, how many
// workstations are linked and how full each team's share of the store is,
// without the administration listener's credentials. Before, a hub had no
// health or metrics at all: a probe's soak could tell its resident set
// from nothing else (2026-12-07).

// hubMetricsTokenFile holds the token /metrics wants, in the hub's state
// dir (0600): the listener is on loopback, where every user of the machine
// reaches it, and the metrics name the teams.
const hubMetricsTokenFile = "metrics-token"

// hubHTTPConns bounds the hub's HTTP connections: a scraper and a probe
// need a few.
const hubHTTPConns = 16

// hubScrapeWithin bounds one scrape's questions to the teams' JetStream:
// a cluster without quorum answers none.
const hubScrapeWithin = 5 * time.Second

// serveHubHTTP serves /healthz (no token) and /metrics (the token of
// hubMetricsTokenFile, as a bearer token) on cfg.HTTPAddr until stop is
// called; with no address it serves nothing.
func serveHubHTTP(cfg *config.Hub, h *embedded.Server, logger *slog.Logger) (stop func(), err error) {
	if cfg.HTTPAddr == "" {
		return func() {}, nil
	}
	token, err := tokenFile(filepath.Join(cfg.StateDir, hubMetricsTokenFile), "hub metrics token")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, inUse(fmt.Errorf("hub http listener: %w", err), listener{config.HubPrefix + "_HTTP_ADDR", cfg.HTTPAddr})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoCollector(readBuildInfo()), &hubCollector{h: h})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { answerHealth(w, hubUnhealthy(h), false) })
	mux.Handle("GET /metrics", bearer(token, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	srv := httpServer(mux, logger)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(web.LimitListener(ln, hubHTTPConns, hubHTTPConns/2, webStall)); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("hub http listener failed; /healthz and /metrics are gone until a restart", "err", err)
		}
	})
	logger.Info("serving the hub's /healthz and /metrics (a bearer token: the file "+hubMetricsTokenFile+" of the state dir)", "url", "http://"+ln.Addr().String()+"/")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		wg.Wait()
	}, nil
}

// hubUnhealthy says why the hub node is not well, "" when it is: its
// server's own health check (JetStream on, its streams and consumers
// current in a cluster).
func hubUnhealthy(h *embedded.Server) string {
	ns := h.NATS()
	if ns == nil {
		return "the server is not running"
	}
	if st := ns.Healthz(nil); st.Status != "ok" {
		return cmp.Or(st.Error, st.Status)
	}
	return ""
}

// bearer lets through only a request that carries token as its bearer
// token.
func bearer(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(web.BearerToken(r)), []byte(token)) != 1 {
			w.Header().Set("Connection", "close")
			w.Header().Set("WWW-Authenticate", `Bearer realm="pisyncd-hub"`)
			http.Error(w, "hub metrics: send the token of the hub's state dir file "+hubMetricsTokenFile+" as a bearer token (Authorization: Bearer TOKEN; Prometheus: authorization.credentials_file)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hubCollector reads the hub node's figures when scraped.
type hubCollector struct{ h *embedded.Server }

var (
	hubLeafLinksDesc = prometheus.NewDesc("pisyncd_hub_leaf_links", "Leaf links of workstations (and other hubs' leaf links) to this hub node.", nil, nil)
	hubClientsDesc   = prometheus.NewDesc("pisyncd_hub_client_connections", "Client connections to this hub node (administration, and the hub's own).", nil, nil)
	hubStoreDesc     = prometheus.NewDesc("pisyncd_hub_team_store_bytes", "What a team's streams hold in this hub's store.", []string{"team"}, nil)
	hubShareDesc     = prometheus.NewDesc("pisyncd_hub_team_store_limit_bytes", "A team's share of this hub's store (-1: none).", []string{"team"}, nil)
	hubScrapeDesc    = prometheus.NewDesc("pisyncd_hub_team_scrape_errors", "Teams whose store figures this scrape could not read (their JetStream did not answer).", nil, nil)
)

func (c *hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hubLeafLinksDesc, hubClientsDesc, hubStoreDesc, hubShareDesc, hubScrapeDesc} {
		ch <- d
	}
}

func (c *hubCollector) Collect(ch chan<- prometheus.Metric) {
	ns := c.h.NATS()
	if ns == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(hubLeafLinksDesc, prometheus.GaugeValue, float64(ns.NumLeafNodes()))
	ch <- prometheus.MustNewConstMetric(hubClientsDesc, prometheus.GaugeValue, float64(ns.NumClients()))
	ctx, cancel := context.WithTimeout(context.Background(), hubScrapeWithin)
	defer cancel()
	failed := 0
	for _, team := range teams(c.h) {
		var used, limit int64
		err := withTeam(c.h, team, func(nc *nats.Conn) error {
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			used, limit, err = teamStore(ctx, js)
			return err
		})
		if err != nil {
			failed++
			continue
		}
		name := cmp.Or(team, server.DEFAULT_GLOBAL_ACCOUNT)
		ch <- prometheus.MustNewConstMetric(hubStoreDesc, prometheus.GaugeValue, float64(used), name)
		ch <- prometheus.MustNewConstMetric(hubShareDesc, prometheus.GaugeValue, float64(limit), name)
	}
	ch <- prometheus.MustNewConstMetric(hubScrapeDesc, prometheus.GaugeValue, float64(failed))
}
