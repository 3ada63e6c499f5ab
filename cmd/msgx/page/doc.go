// Package page is msgx's status page for operators: GET / serves one HTML
// page (its script and style embedded in the binary, nothing loaded from
// elsewhere) that reads GET /status and GET /status/history every few
// seconds and shows whether msgx keeps up (lag, throughput and latency over
// the last minutes, drawn), whether anything is stuck (open hole, the queue's
// head, groups without members), what needs a human (DEAD messages by class
// with their latest reasons and, for a replayable class, a link to the
// replay dry run — for MALFORMED and PROTOCOL what to do instead —,
// abandoned marks, late rows, alerts), and the components. Every time it
// shows carries the browser zone's offset. Its search box leads to a
// message's or a flight's trace shown as a page ([WriteTrace]).
//
// [History] is the data behind the charts: an in-process sampler that takes,
// every MSGX_PAGE_SAMPLE_INTERVAL on the injected clock, the inbox and
// consumer lag (status.Collector.Lag, primary-key reads and the Kafka offset
// round trips only), the decision and event rates (from the components'
// running totals) and the end-to-end and decision latency quantiles of the
// interval (from the observations the metrics histograms receive, at most
// 1024 kept per interval), and keeps the last MSGX_PAGE_WINDOW of them. It is
// in memory: a restart starts the charts empty.
//
// The page is a read endpoint like any other: with MSGX_HTTP_READ_TOKEN set
// the server's guard (internal/web) sends a browser to its login form, and
// the session cookie it sets carries the page's own requests.
package page
