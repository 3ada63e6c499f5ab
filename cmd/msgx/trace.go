package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"msgx/internal/retry"
	"msgx/sink"
	"msgx/sink/trace"
)

// traceDefaultLimit is how many versions a flight's trace lists unless told.
const traceDefaultLimit = 200

// traceCommand prints a message's trace or a flight's history, read
// directly from PostgreSQL and the MySQL inbox (docs/operations.md,
// "Tracing a message"). The same over HTTP: GET /trace/{msgId}, GET
// /trace/flights/{flid}?limit=N (JSON; ?format=text for the table).
func traceCommand(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the trace as JSON")
	flid := fs.String("flid", "", "trace this flight's history instead of a message")
	limit := fs.Int("limit", traceDefaultLimit, "the most versions of a flight to list (newest)")
	return func(ctx context.Context, x *invocation, pos []string) error {
		var msgID int64
		switch {
		case *flid != "" && len(pos) == 0:
			if *limit <= 0 {
				return usagef("--limit %d: must be positive", *limit)
			}
		case *flid == "" && len(pos) == 1:
			var err error
			if msgID, err = strconv.ParseInt(pos[0], 10, 64); err != nil || msgID <= 0 {
				return usagef("MSG_ID %q: want a positive integer", pos[0])
			}
		case *flid != "":
			return usagef("--flid takes no MSG_ID")
		default:
			return usagef("want one MSG_ID, or --flid FLID")
		}
		return runTrace(ctx, x.cfg, msgID, *flid, *limit, *asJSON, x.stdout)
	}
}

// runTrace prints message msgID's trace, or flight flid's history when flid
// is set.
func runTrace(ctx context.Context, cfg Config, msgID int64, flid string, limit int, asJSON bool, out io.Writer) error {
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	my, zone, err := openInbox(cfg)
	if err != nil {
		return err
	}
	defer my.Close()
	r, err := trace.New(trace.Deps{PG: pool, MySQL: my, Zone: zone, InboxTable: cfg.Ingest.Table, Timeout: cfg.DB.Timeout})
	if err != nil {
		return err
	}
	var v interface{ Text(io.Writer) error }
	if flid != "" {
		f, err := r.Flight(ctx, flid, limit)
		if err != nil {
			return err
		}
		v = f
	} else {
		m, err := r.Message(ctx, msgID)
		if err != nil {
			return err
		}
		v = m
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return v.Text(out)
}

// registerTrace adds GET /trace/{msgId} and GET /trace/flights/{flid} to
// mux: the trace as JSON, or as the CLI's table with ?format=text. They
// are read endpoints (MSGX_HTTP_READ_TOKEN, internal/web). 404 when nothing
// knows the message or flight, 400 for a bad ID or limit, 503 when
// PostgreSQL is unreachable.
func registerTrace(mux *http.ServeMux, cfg Config, d *deps) {
	r, err := trace.New(trace.Deps{PG: d.pool, MySQL: d.mysql, Zone: d.zone, InboxTable: cfg.Ingest.Table, Timeout: cfg.DB.Timeout})
	if err != nil {
		// Only a wiring mistake gets here; the routes say so.
		mux.HandleFunc("GET /trace/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
		return
	}
	mux.HandleFunc("GET /trace/{msgId}", func(w http.ResponseWriter, req *http.Request) {
		id, err := strconv.ParseInt(req.PathValue("msgId"), 10, 64)
		if err != nil || id <= 0 {
			http.Error(w, "msgId: want a positive integer", http.StatusBadRequest)
			return
		}
		m, err := r.Message(req.Context(), id)
		serveTrace(w, req, d.log, m, err)
	})
	mux.HandleFunc("GET /trace/flights/{flid}", func(w http.ResponseWriter, req *http.Request) {
		limit := traceDefaultLimit
		if s := req.URL.Query().Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 || n > 100000 {
				http.Error(w, "limit: want 1..100000", http.StatusBadRequest)
				return
			}
			limit = n
		}
		f, err := r.Flight(req.Context(), req.PathValue("flid"), limit)
		serveTrace(w, req, d.log, f, err)
	})
}

func serveTrace(w http.ResponseWriter, req *http.Request, log *slog.Logger, v interface{ Text(io.Writer) error }, err error) {
	switch {
	case errors.Is(err, trace.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		code := http.StatusInternalServerError
		if retry.IsOutage(err) {
			code = http.StatusServiceUnavailable
		}
		log.Warn("trace failed", "component", "trace-http", "path", req.URL.Path, "err", err)
		http.Error(w, err.Error(), code)
		return
	}
	if req.URL.Query().Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = v.Text(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
