package web

import (
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"msgx/internal/clock"
)

// throttleClients is the most client addresses the throttle tracks at
// once (about 200 bytes each).
const throttleClients = 10000

// throttle limits the wrong credentials a client address may present — a
// wrong read token at /login, a wrong bearer token on any endpoint — to
// MSGX_HTTP_THROTTLE_FAILURES per MSGX_HTTP_THROTTLE_PERIOD. The sequence:
//
//  1. A client's first failure opens its period; each failure within the
//     period counts.
//  2. Once the count reaches the limit, the address's requests that
//     present a credential (an Authorization header, a POST /login) are
//     answered 429 with Retry-After until the period ends, without the
//     credential being compared: a right guess looks like a wrong one. Its
//     other requests — a page with a valid session cookie, the probes — go
//     on as before. The address is logged once, when it reaches the limit.
//  3. After the period the address starts afresh.
//
// The check happens just before each comparison, so concurrent requests of
// one address can each pass it only in the moment between the check and
// the comparison (no I/O in between).
//
// Memory is bounded: at most size addresses are tracked, oldest period
// first, and expired ones are dropped as new ones come. When the table is
// full of live periods — an attacker with many addresses — every address
// not in it shares one more entry, so the guesses per period stay bounded
// (size+1 times the limit) however many addresses there are; a legitimate
// new client may then be refused until that shared period ends.
type throttle struct {
	limit  int
	period time.Duration
	size   int
	clock  clock.Clock
	log    *slog.Logger

	mu       sync.Mutex
	clients  map[string]*list.Element // of *strikes, ordered by since
	order    *list.List
	overflow strikes

	failures, refused int64
}

// strikes are one address's failures in its current period.
type strikes struct {
	key    string
	since  time.Time
	n      int
	logged bool
}

func newThrottle(limit int, period time.Duration, size int, c clock.Clock, log *slog.Logger) *throttle {
	return &throttle{limit: limit, period: period, size: size, clock: c, log: log,
		clients: map[string]*list.Element{}, order: list.New(), overflow: strikes{key: "other addresses (table full)"}}
}

// sweepLocked drops the addresses whose period has ended.
func (t *throttle) sweepLocked(now time.Time) {
	for e := t.order.Front(); e != nil; e = t.order.Front() {
		s := e.Value.(*strikes)
		if now.Sub(s.since) < t.period {
			return
		}
		t.order.Remove(e)
		delete(t.clients, s.key)
	}
}

// entryLocked returns key's strikes: its own, or the shared ones when the
// table is full. create adds an address that has none yet.
func (t *throttle) entryLocked(key string, now time.Time, create bool) *strikes {
	t.sweepLocked(now)
	if e, ok := t.clients[key]; ok {
		return e.Value.(*strikes)
	}
	if len(t.clients) >= t.size {
		return &t.overflow
	}
	if !create {
		return nil
	}
	s := &strikes{key: key, since: now}
	t.clients[key] = t.order.PushBack(s)
	return s
}

// wait is how long key is still refused (0: it may try).
func (t *throttle) wait(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	s := t.entryLocked(key, now, false)
	if s == nil || s.n < t.limit || now.Sub(s.since) >= t.period {
		return 0
	}
	t.refused++
	return s.since.Add(t.period).Sub(now)
}

// fail counts a wrong credential of key.
func (t *throttle) fail(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	t.failures++
	s := t.entryLocked(key, now, true)
	if now.Sub(s.since) >= t.period { // only the shared entry outlives its period
		s.since, s.n, s.logged = now, 0, false
	}
	s.n++
	if s.n >= t.limit && !s.logged {
		s.logged = true
		t.log.Warn("too many wrong credentials: refusing this client's credentials with 429 until the period ends",
			"client", s.key, "failures", s.n, "period", t.period.String(),
			"until", s.since.Add(t.period).UTC().Format(time.RFC3339))
	}
}

// counts returns the wrong credentials seen, the requests refused with
// 429 and the addresses refused now (the shared entry counting as one).
func (t *throttle) counts() (failures, refused int64, blocked int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	t.sweepLocked(now)
	for _, e := range t.clients {
		if s := e.Value.(*strikes); s.n >= t.limit {
			blocked++
		}
	}
	if t.overflow.n >= t.limit && now.Sub(t.overflow.since) < t.period {
		blocked++
	}
	return t.failures, t.refused, blocked
}

// retryAfter is the Retry-After value of a wait: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

// clientKey is the address a request is counted under: the connection's
// peer, or with MSGX_HTTP_BEHIND_TLS_PROXY the last X-Forwarded-For hop —
// the address the proxy itself saw and appended; the hops before it are
// whatever the client wrote. An IPv6 client is counted by its /64, the
// block one host or customer gets, so an attacker cannot step through the
// addresses of its own network.
func clientKey(r *http.Request, behindProxy bool) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if behindProxy {
		if hop := lastHop(r.Header.Values("X-Forwarded-For")); hop != "" {
			host = hop
		}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// lastHop is the last address of X-Forwarded-For (its lines joined), ""
// when it is not an address.
func lastHop(values []string) string {
	if len(values) == 0 {
		return ""
	}
	hops := strings.Split(values[len(values)-1], ",")
	hop := strings.TrimSpace(hops[len(hops)-1])
	if _, err := netip.ParseAddr(hop); err != nil {
		return ""
	}
	return hop
}
