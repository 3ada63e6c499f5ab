package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"msgx/cmd/msgx/page"
	"msgx/inspect/trace"
	"msgx/internal/retry"
	"msgx/sink"
)

// traceDefaultLimit is how many versions a flight's trace lists unless told.
const traceDefaultLimit = 200

// traceCommand prints a message's trace or a flight's history, read
// directly from PostgreSQL and the MySQL inbox
// (docs/operations.md#trace-one-message-flight-or-request). The same over
// HTTP: GET /trace/{msgId}, GET /trace/flights/{flid}?limit=N (JSON;
// ?format=text for the table).
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
	tables, zone, closeInbox, err := openInbox(cfg)
	if err != nil {
		return err
	}
	defer closeInbox()
	r, err := trace.New(trace.Deps{PG: pool, Inbox: tables, Zone: zone, Timeout: cfg.DB.Timeout})
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
// mux: the trace as JSON, as the CLI's table with ?format=text, or as a page
// with ?format=html (the status page's search box leads there through GET
// /trace?kind=message|flight&id=…). They are read endpoints
// (MSGX_HTTP_READ_TOKEN, internal/web). 404 when nothing knows the message
// or flight, 400 for a bad ID or limit, 503 when PostgreSQL is unreachable.
func registerTrace(mux *http.ServeMux, cfg Config, d *deps) {
	r, err := trace.New(trace.Deps{PG: d.pool, Inbox: d.tables, Zone: d.zone, Timeout: cfg.DB.Timeout})
	if err != nil {
		// Only a wiring mistake gets here; the routes say so.
		mux.HandleFunc("GET /trace/", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
		return
	}
	mux.HandleFunc("GET /trace", traceSearch)
	mux.HandleFunc("GET /trace/{msgId}", func(w http.ResponseWriter, req *http.Request) {
		id, err := strconv.ParseInt(req.PathValue("msgId"), 10, 64)
		if err != nil || id <= 0 {
			traceError(w, req, "message", req.PathValue("msgId"), "msgId: want a positive integer", http.StatusBadRequest)
			return
		}
		m, err := r.Message(req.Context(), id)
		serveTrace(w, req, d.log, "message", strconv.FormatInt(id, 10), m, err)
	})
	mux.HandleFunc("GET /trace/flights/{flid}", func(w http.ResponseWriter, req *http.Request) {
		limit := traceDefaultLimit
		if s := req.URL.Query().Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 || n > 100000 {
				traceError(w, req, "flight", req.PathValue("flid"), "limit: want 1..100000", http.StatusBadRequest)
				return
			}
			limit = n
		}
		f, err := r.Flight(req.Context(), req.PathValue("flid"), limit)
		serveTrace(w, req, d.log, "flight", req.PathValue("flid"), f, err)
	})
}

// traceSearch is the status page's search box: GET /trace?kind=message&id=42
// or ?kind=flight&id=100 leads to that trace's page.
func traceSearch(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	kind, id := q.Get("kind"), strings.TrimSpace(q.Get("id"))
	switch {
	case id == "":
		traceError(w, req, kind, id, "give a message ID or a FLID", http.StatusBadRequest)
	case kind == "flight":
		http.Redirect(w, req, "/trace/flights/"+url.PathEscape(id)+"?format=html", http.StatusSeeOther)
	case kind == "message" || kind == "":
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
			traceError(w, req, "message", id, fmt.Sprintf("%q is not a message ID (a positive integer); a FLID is traced as a flight", id), http.StatusBadRequest)
			return
		}
		http.Redirect(w, req, "/trace/"+id+"?format=html", http.StatusSeeOther)
	default:
		traceError(w, req, kind, id, fmt.Sprintf("kind %q: want message or flight", kind), http.StatusBadRequest)
	}
}

// traceError answers a trace request that has no trace: a page for a
// browser (?format=html, the search box), plain text otherwise.
func traceError(w http.ResponseWriter, req *http.Request, kind, id, msg string, code int) {
	if req.URL.Path == "/trace" { // the search box: there is no trace to give as JSON
		page.WriteTrace(w, code, page.Trace{Title: strings.TrimSpace(kind + " " + id), Kind: kind, ID: id, Error: msg})
		return
	}
	if req.URL.Query().Get("format") == "html" {
		page.WriteTrace(w, code, page.Trace{Title: kind + " " + id, Kind: kind, ID: id, Error: msg, JSON: jsonURL(req)})
		return
	}
	http.Error(w, msg, code)
}

func serveTrace(w http.ResponseWriter, req *http.Request, log *slog.Logger, kind, id string, v interface{ Text(io.Writer) error }, err error) {
	switch {
	case errors.Is(err, trace.ErrNotFound):
		traceError(w, req, kind, id, err.Error(), http.StatusNotFound)
		return
	case err != nil:
		code := http.StatusInternalServerError
		if retry.IsOutage(err) {
			code = http.StatusServiceUnavailable
		}
		log.Warn("trace failed", "component", "trace-http", "path", req.URL.Path, "err", err)
		traceError(w, req, kind, id, err.Error(), code)
		return
	}
	switch req.URL.Query().Get("format") {
	case "text":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = v.Text(w)
		return
	case "html":
		var text strings.Builder
		_ = v.Text(&text)
		page.WriteTrace(w, http.StatusOK, page.Trace{Title: kind + " " + id, Kind: kind, ID: id, Text: text.String(),
			JSON: jsonURL(req), Links: traceLinks(v)})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// jsonURL is the JSON form of a trace request.
func jsonURL(req *http.Request) string {
	u := *req.URL
	q := u.Query()
	q.Del("format")
	u.RawQuery = q.Encode()
	return u.RequestURI()
}

// maxTraceLinks bounds the links of a trace page (a flight's history may
// name hundreds of messages).
const maxTraceLinks = 50

// traceLinks lead from a message's trace to its flights and from a
// flight's to its messages, newest last.
func traceLinks(v any) []page.Link {
	var out []page.Link
	seen := map[string]bool{}
	add := func(label, href string) {
		if !seen[href] && len(out) < maxTraceLinks {
			seen[href] = true
			out = append(out, page.Link{Label: label, Href: href})
		}
	}
	switch t := v.(type) {
	case trace.Message:
		for _, tr := range t.Transitions {
			if tr.Kind == "flight" {
				add("flight "+tr.Key, "/trace/flights/"+url.PathEscape(tr.Key)+"?format=html")
			}
		}
		for _, ver := range t.Versions {
			add("flight "+ver.FLID, "/trace/flights/"+url.PathEscape(ver.FLID)+"?format=html")
		}
	case trace.Flight:
		for i := len(t.Versions) - 1; i >= 0; i-- {
			id := strconv.FormatInt(t.Versions[i].MsgID, 10)
			add("message "+id, "/trace/"+id+"?format=html")
		}
	}
	return out
}
