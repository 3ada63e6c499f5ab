package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	"msgx/internal/clock"
	"msgx/sink"
)

// requestCommand is `msgx request refdata <RTYPE>...` and `msgx request
// flights --from <t> --to <t>`: it writes an RQRD (one for every category
// named) / RQFD into COUTMSGS through request tracking and prints the
// tracked request.
func requestCommand(fs *flag.FlagSet) runFunc {
	from := fs.String("from", "", "start of the flight window: 2006-01-02T15:04 airport local time, or RFC 3339")
	to := fs.String("to", "", "end of the flight window, as --from")
	return func(ctx context.Context, x *invocation, args []string) error {
		cfg := x.cfg
		var f, t time.Time
		switch {
		case len(args) == 0:
			return usagef("want refdata or flights")
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
			return usagef("unknown kind %q (want refdata or flights)", args[0])
		}
		pool, err := sink.OpenPG(ctx, cfg.DB)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := sink.Migrate(cfg.DB); err != nil {
			return err
		}
		my, _, err := openInbox(cfg)
		if err != nil {
			return err
		}
		defer my.Close()
		reqs, err := newRequests(cfg, &deps{pool: pool, mysql: my, clock: clock.Real{}, log: x.log})
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
