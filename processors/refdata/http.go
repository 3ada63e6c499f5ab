package refdata

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/clock"
	"msgx/internal/retry"
	"msgx/sink"
	"msgx/tables/refdata"
)

// Handler serves the read-only reference-data inspection endpoints
// from ref_master, PostgreSQL being the read model other systems query
// (docs/design.md#truth):
//
//   - GET /refdata/{rtype}: the category's records as a JSON array sorted by
//     key. A supported RTYPE without rows answers 200 with [] (an emptied or
//     not yet downloaded category is a legitimate state, not an error); an
//     RTYPE that is not reference data (refdata.Supported) answers 404.
//   - GET /refdata/{rtype}/{rkey}: one record, 404 when unknown. An RSTA key
//     is "RTYP|RSID" ("GATE|21", sent as GATE%7C21 or GATE|21); a key
//     containing "/" is sent as %2F.
//
// The RTYPE is matched case-insensitively (SIS types are upper case); keys
// are exact. Each element is an object with the names of refdata.View —
// "key", "attrs", "updatedAt", "lastMsgId" — and, for RSTA only, "status"
// ("E" or "D" at Clock.Now(), windows read in Loc) and "statusUntil" (when
// that status ends by itself, null if it holds until the next event).
//
// Database failures answer 503 when PostgreSQL is unreachable or too slow
// (retry.IsOutage) and 500 otherwise, with a text/plain reason.
type Handler struct {
	// Pool is msgx's PostgreSQL.
	Pool *pgxpool.Pool
	// Timeout bounds each database call (MSGX_DB_TIMEOUT); must be positive.
	Timeout time.Duration
	// Clock gives the instant RSTA statuses are computed at; required.
	Clock clock.Clock
	// Loc is the airport time zone in which RSTA windows are read
	// (MSGX_AIRPORT_TZ); nil means UTC.
	Loc *time.Location
	// Log receives failures; nil means slog.Default().
	Log *slog.Logger
}

// Register adds the handler's routes to mux, for a server that serves other
// endpoints beside these.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /refdata/{rtype}", h.list)
	mux.HandleFunc("GET /refdata/{rtype}/{rkey}", h.get)
}

// ServeHTTP serves the routes of Register on their own. Anything else is
// answered by an http.ServeMux: 404 for other paths, 405 for other methods.
// The mux is built per request so that a plain struct literal stays usable
// without a constructor or a lock to copy; next to the database read its
// cost does not matter.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	h.Register(mux)
	mux.ServeHTTP(w, r)
}

// entryJSON is one element of the responses. The embedded pointer is nil
// for every RTYPE but RSTA, which leaves status and statusUntil out, while an
// RSTA entry always carries both (statusUntil may be null).
type entryJSON struct {
	Key       string          `json:"key"`
	Attrs     json.RawMessage `json:"attrs"`
	UpdatedAt time.Time       `json:"updatedAt"`
	LastMsgID int64           `json:"lastMsgId"`
	*statusJSON
}

type statusJSON struct {
	Status      string     `json:"status"`
	StatusUntil *time.Time `json:"statusUntil"`
}

func toEntryJSON(r sink.RefRow) entryJSON {
	e := entryJSON{Key: r.RKey, Attrs: r.Attributes, UpdatedAt: r.UpdatedAt, LastMsgID: r.LastMsgID}
	if r.RType == refdata.RSTA {
		e.statusJSON = &statusJSON{Status: r.Status, StatusUntil: r.StatusUntil}
	}
	return e
}

func (h *Handler) logger() *slog.Logger {
	l := h.Log
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", "refdata-http")
}

// rtype returns the request's RTYPE, or answers 404 and returns false when
// it is not reference data: a typo then does not look like an empty category.
func (h *Handler) rtype(w http.ResponseWriter, r *http.Request) (string, bool) {
	rtype := strings.ToUpper(r.PathValue("rtype"))
	if !refdata.Supported(rtype) {
		http.Error(w, "unknown reference type "+rtype, http.StatusNotFound)
		return "", false
	}
	return rtype, true
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	rtype, ok := h.rtype(w, r)
	if !ok {
		return
	}
	rows, err := sink.RefRecords(r.Context(), h.Pool, h.Timeout, rtype, h.Clock.Now(), h.Loc)
	if err != nil {
		h.fail(w, r, err, "rtype", rtype)
		return
	}
	out := make([]entryJSON, len(rows))
	for i, row := range rows {
		out[i] = toEntryJSON(row)
	}
	h.writeJSON(w, r, out)
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	rtype, ok := h.rtype(w, r)
	if !ok {
		return
	}
	rkey := r.PathValue("rkey")
	row, found, err := sink.RefRecord(r.Context(), h.Pool, h.Timeout, rtype, rkey, h.Clock.Now(), h.Loc)
	if err != nil {
		h.fail(w, r, err, "rtype", rtype, "rkey", rkey)
		return
	}
	if !found {
		http.Error(w, "no "+rtype+" record "+rkey, http.StatusNotFound)
		return
	}
	h.writeJSON(w, r, toEntryJSON(row))
}

// fail answers a database error. A client that went away is not worth an
// error log; an outage is a 503 so that callers know to retry.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, attrs ...any) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		h.logger().Debug("reference read abandoned by the client", append(attrs, "err", err)...)
		return
	}
	status := http.StatusInternalServerError
	if retry.IsOutage(err) {
		status = http.StatusServiceUnavailable
	}
	h.logger().Error("reference read failed", append(attrs, "err", err, "status", status)...)
	http.Error(w, "reading reference data failed", status)
}

func (h *Handler) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Attributes come from jsonb, so this is not expected; say so loudly.
		h.logger().Error("encoding reference response", "path", r.URL.Path, "err", err)
		http.Error(w, "encoding response failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}
