package flights

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/internal/retry"
	"msgx/sink"
)

// Handler serves the read-only flight endpoints from flight_schd.doc, the
// flight JSON of docs/design.md#events exactly as stored (the schd topic
// carries the same document):
//
//   - GET /flights/{flid}: one flight (ACTIVE or DELETED), 200
//     application/json; 404 when the FLID is unknown.
//   - GET /flights?day=YYYY-MM-DD: the flights of that operation day as a
//     JSON array ordered by FLID, [] for a day without flights; 400 when day
//     is missing or not a date.
//
// Database failures answer 503 when PostgreSQL is unreachable or too slow
// (retry.IsOutage) and 500 otherwise, with a text/plain reason. Other
// methods get 405 and other paths 404 from http.ServeMux.
type Handler struct {
	// Pool is msgx's PostgreSQL.
	Pool *pgxpool.Pool
	// Timeout bounds each database call (MSGX_DB_TIMEOUT); zero or negative
	// means sink.DefaultFlightWriteTimeout (10s).
	Timeout time.Duration
	// Log receives failures; nil means slog.Default().
	Log *slog.Logger
}

// Register adds the handler's routes to mux, for a server that serves other
// endpoints beside these.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /flights/{flid}", h.get)
	mux.HandleFunc("GET /flights", h.list)
}

// ServeHTTP serves the routes of Register on their own.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := http.NewServeMux()
	h.Register(mux)
	mux.ServeHTTP(w, r)
}

func (h *Handler) logger() *slog.Logger {
	l := h.Log
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", "flights-http")
}

func (h *Handler) timeout() time.Duration {
	if h.Timeout <= 0 {
		return sink.DefaultFlightWriteTimeout
	}
	return h.Timeout
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	flid := r.PathValue("flid")
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	doc, ok, err := sink.GetFlight(ctx, h.Pool, flid)
	if err != nil {
		h.fail(w, r, err, "flid", flid)
		return
	}
	if !ok {
		http.Error(w, "unknown flight "+flid, http.StatusNotFound)
		return
	}
	h.write(w, doc)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	param := r.URL.Query().Get("day")
	if param == "" {
		http.Error(w, "missing day=YYYY-MM-DD", http.StatusBadRequest)
		return
	}
	day, err := time.Parse(time.DateOnly, param)
	if err != nil {
		http.Error(w, "day must be YYYY-MM-DD, got "+param, http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout())
	defer cancel()
	docs, err := sink.FlightsByDay(ctx, h.Pool, day)
	if err != nil {
		h.fail(w, r, err, "day", param)
		return
	}
	// The documents are already JSON: join them rather than decode and
	// re-encode every flight.
	size := 2
	for _, d := range docs {
		size += len(d) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, '[')
	for i, d := range docs {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, d...)
	}
	h.write(w, append(body, ']'))
}

func (h *Handler) write(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, attrs ...any) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		h.logger().Debug("flight read abandoned by the client", append(attrs, "err", err)...)
		return
	}
	status := http.StatusInternalServerError
	if retry.IsOutage(err) {
		status = http.StatusServiceUnavailable
	}
	h.logger().Error("flight read failed", append(attrs, "err", err, "status", status)...)
	http.Error(w, "reading flights failed", status)
}
