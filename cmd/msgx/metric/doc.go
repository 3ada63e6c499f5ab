// Package metric exposes msgx's figures in the Prometheus format on
// /metrics. Counters and gauges are read from the components' own running
// figures (their Stats, gathered in [Sources]) and from the status report at
// scrape time, so the components carry no metrics code; only the two latency
// histograms are observed as events happen.
package metric
