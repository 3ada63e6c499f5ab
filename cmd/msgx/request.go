package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"msgx/internal/clock"
	"msgx/sink"
)

// runRequest serves `msgx request refdata <RTYPE>…` and
// `msgx request flights --from <t> --to <t>`: it writes an RQRD (one, for
// every category named) / RQFD into COUTMSGS through request tracking and
// prints the tracked request.
func runRequest(ctx context.Context, cfg Config, args []string, out io.Writer, log *slog.Logger) error {
	usage := "usage: msgx request refdata <RTYPE>… | msgx request flights --from <time> --to <time> (time: 2006-01-02T15:04 airport local, or RFC 3339)"
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	pool, err := sink.OpenPG(ctx, cfg.DB)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := sink.Migrate(cfg.DB); err != nil {
		return err
	}
	my, err := sink.OpenMySQL(cfg.DB, cfg.Location(), nil)
	if err != nil {
		return err
	}
	defer my.Close()
	reqs, err := newRequests(cfg, &deps{pool: pool, mysql: my, clock: clock.Real{}, log: log})
	if err != nil {
		return err
	}
	var res any
	switch args[0] {
	case "refdata":
		if len(args) < 2 {
			return fmt.Errorf("%s", usage)
		}
		res, err = reqs.RequestRefdata(ctx, args[1:]...)
	case "flights":
		fs := flag.NewFlagSet("request flights", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		from := fs.String("from", "", "start of the window")
		to := fs.String("to", "", "end of the window")
		if err := fs.Parse(args[1:]); err != nil {
			return fmt.Errorf("%v; %s", err, usage)
		}
		f, err1 := parseLocal(*from, cfg.Location())
		t, err2 := parseLocal(*to, cfg.Location())
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s", usage)
		}
		res, err = reqs.RequestFlights(ctx, f, t)
	default:
		return fmt.Errorf("%s", usage)
	}
	if res != nil {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
	}
	return err
}

func parseLocal(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.ParseInLocation("2006-01-02T15:04", s, loc)
}
