package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"msgx/emitters/outbound"
	"msgx/internal/clock"
	"msgx/sink"
	"msgx/tables/request"
)

// requestCommand is `msgx request refdata <RTYPE>...` and `msgx request
// flights --from <t> --to <t>`: it writes an RQRD (one for every category
// named) / RQFD into COUTMSGS through request tracking and prints the
// tracked request. `msgx request list` and `msgx request show ID` print the
// tracked requests with their answers (PostgreSQL only).
func requestCommand(fs *flag.FlagSet) runFunc {
	from := fs.String("from", "", "start of the flight window: 2006-01-02T15:04 airport local time, or RFC 3339")
	to := fs.String("to", "", "end of the flight window, as --from")
	asJSON := fs.Bool("json", false, "list, show: JSON instead of text")
	limit := fs.Int("limit", 50, "list: the newest N requests (0: all)")
	return func(ctx context.Context, x *invocation, args []string) error {
		cfg := x.cfg
		var f, t time.Time
		if len(args) > 0 && (args[0] == "list" || args[0] == "show") {
			if *from != "" || *to != "" {
				return usagef("--from and --to are for request flights")
			}
			return listRequests(ctx, x, args, *asJSON, *limit)
		}
		if *asJSON {
			return usagef("--json is for request list and request show")
		}
		switch {
		case len(args) == 0:
			return usagef("want refdata, flights, list or show")
		case args[0] == "refdata":
			if len(args) < 2 {
				return usagef("refdata needs at least one RTYPE")
			}
			if *from != "" || *to != "" {
				return usagef("--from and --to are for request flights")
			}
		case args[0] == "flights":
			if err := noArgs(args[1:]); err != nil {
				return err
			}
			var err error
			if f, err = parseLocal(*from, cfg.Location()); err != nil {
				return usagef("--from: %v", err)
			}
			if t, err = parseLocal(*to, cfg.Location()); err != nil {
				return usagef("--to: %v", err)
			}
		default:
			return usagef("unknown kind %q (want refdata, flights, list or show)", args[0])
		}
		pool, err := sink.OpenPG(ctx, cfg.DB)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := sink.Migrate(cfg.DB); err != nil {
			return err
		}
		tables, _, closeInbox, err := openInbox(cfg)
		if err != nil {
			return err
		}
		defer closeInbox()
		reqs, err := newRequests(cfg, &deps{pool: pool, tables: tables, clock: clock.Real{}, log: x.log})
		if err != nil {
			return err
		}
		var res any
		if args[0] == "refdata" {
			res, err = reqs.RequestRefdata(ctx, args[1:]...)
		} else {
			res, err = reqs.RequestFlights(ctx, f, t)
		}
		if res != nil {
			enc := json.NewEncoder(x.stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(res)
		}
		return err
	}
}

func parseLocal(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04", s, loc)
	if err != nil {
		return t, fmt.Errorf("%q is not a time (want 2006-01-02T15:04 airport local, or RFC 3339)", s)
	}
	return t, nil
}

// listRequests is `msgx request list` and `msgx request show ID`.
func listRequests(ctx context.Context, x *invocation, args []string, asJSON bool, limit int) error {
	var id int64
	switch {
	case args[0] == "list":
		if err := noArgs(args[1:]); err != nil {
			return err
		}
		if limit < 0 {
			return usagef("--limit must not be negative")
		}
	case len(args) != 2:
		return usagef("show needs one request ID")
	default:
		var err error
		if id, err = strconv.ParseInt(args[1], 10, 64); err != nil || id <= 0 {
			return usagef("request ID %q is not a positive integer", args[1])
		}
	}
	pool, err := sink.OpenPG(ctx, x.cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := sink.Migrate(x.cfg.DB); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.DB.Timeout)
	defer cancel()
	var res any
	if args[0] == "list" {
		res, err = outbound.List(ctx, pool, limit)
	} else {
		res, err = outbound.Show(ctx, pool, id)
	}
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(x.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	loc := x.cfg.Location()
	if list, ok := res.([]outbound.Tracked); ok {
		return writeRequestList(x.stdout, list, loc)
	}
	return writeRequest(x.stdout, res.(outbound.Tracked), loc)
}

// requestWhat is what a request asks for: its categories, or its window in
// airport time.
func requestWhat(r request.ReqTrack, loc *time.Location) string {
	if r.Kind == request.RQFD {
		return "flights " + r.WindowFrom.In(loc).Format("2006-01-02T15:04Z07:00") + ".." + r.WindowTo.In(loc).Format("2006-01-02T15:04Z07:00")
	}
	return "categories " + strings.Join(r.RTypes, ",")
}

// requestAnswer sums up how a request ended: its last answer, or why it
// closed, or why it is not sent yet.
func requestAnswer(t outbound.Tracked) string {
	if n := len(t.Answers); n > 0 {
		a := t.Answers[n-1]
		s := fmt.Sprintf("#%d %s %s", a.MsgID, a.Type, a.Outcome)
		if c := strings.TrimSpace(a.Code + " " + a.Text); c != "" {
			s += ": " + c
		}
		if n > 1 {
			s += fmt.Sprintf(" (%d answers)", n)
		}
		return s
	}
	if t.CloseReason != "" {
		return t.CloseReason
	}
	if t.LastError != "" {
		return "last error: " + t.LastError
	}
	return "-"
}

func utcOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func writeRequestList(w io.Writer, list []outbound.Tracked, loc *time.Location) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no requests")
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tASKS FOR\tSEQN\tSTATE\tCREATED (UTC)\tSENT\tCLOSED\tCOUTMSGS_ID\tANSWER")
	for _, t := range list {
		outbox := "-"
		if t.OutboxID != 0 {
			outbox = strconv.FormatInt(t.OutboxID, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, requestWhat(t.ReqTrack, loc), t.SEQN, t.State,
			utcOrDash(t.CreatedAt), utcOrDash(t.SentAt), utcOrDash(t.ClosedAt), outbox, requestAnswer(t))
	}
	return tw.Flush()
}

func writeRequest(w io.Writer, t outbound.Tracked, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	p := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	p("request", fmt.Sprintf("%d, %s (STYP %s), SEQN %d, SNDR %s", t.ID, t.Kind, t.STYP, t.SEQN, t.SNDR))
	p("asks for", requestWhat(t.ReqTrack, loc))
	if len(t.Answered) > 0 {
		p("answered", strings.Join(t.Answered, ","))
	}
	p("state", string(t.State))
	p("created", utcOrDash(t.CreatedAt))
	outbox := fmt.Sprintf("not confirmed (%d insert attempts)", t.Attempts)
	if t.OutboxID != 0 {
		outbox = fmt.Sprintf("COUTMSGS_ID %d, inserted %s", t.OutboxID, utcOrDash(t.SentAt))
	}
	p("outbox", outbox)
	if t.LastError != "" {
		p("last error", t.LastError)
	}
	if !t.ClosedAt.IsZero() {
		p("closed", utcOrDash(t.ClosedAt)+", "+t.CloseReason)
	}
	if len(t.Answers) == 0 {
		p("answers", "none")
	}
	for _, a := range t.Answers {
		line := fmt.Sprintf("#%d %s %s at %s", a.MsgID, a.Type, a.Outcome, utcOrDash(a.At))
		if a.PairedBy != "" {
			line += ", paired by " + a.PairedBy
		}
		if c := strings.TrimSpace(a.Code + " " + a.Text); c != "" {
			line += ": " + c
		}
		p("answer", line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "payload\n%s\n", t.Payload)
	return err
}
