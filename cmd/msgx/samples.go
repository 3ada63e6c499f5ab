package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"msgx/internal/sample"
	"msgx/sink/aodb"
)

// samplesCommand is `msgx samples`: every real-format SIS sample of
// testdata/sis-samples inserted into the inbox as the AODB would, each with
// a SEQN of its own (the samples share some, so sent as they are most would
// be SKIPPED as duplicates), in an order that applies each of them
// (sample.Ordered). For a development or test inbox: refused with
// MSGX_ENV=production and in shadow mode.
func samplesCommand(fs *flag.FlagSet) runFunc {
	dir := fs.String("dir", "", "the sample directory (default: testdata/sis-samples of the source tree msgx runs in)")
	return func(ctx context.Context, x *invocation, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		cfg := x.cfg
		switch {
		case strings.EqualFold(cfg.Env, "production"):
			return errors.New("MSGX_ENV=production: msgx samples inserts test messages into the inbox; it is for development inboxes only")
		case cfg.Backfill.Shadow:
			return errors.New("MSGX_SHADOW=true: msgx never writes to the inbox in shadow mode")
		}
		d := *dir
		if d == "" {
			d = sample.Dir()
		}
		samples, err := sample.Load(d)
		if err != nil {
			return err
		}
		if len(samples) == 0 {
			return fmt.Errorf("no sample messages in %s", d)
		}
		tables, _, closeInbox, err := openInbox(cfg)
		if err != nil {
			return err
		}
		defer closeInbox()
		// SEQNs of this run: above those of any earlier run (seconds since
		// the epoch, times a thousand), so repeating the command sends new
		// messages rather than duplicates.
		base := time.Now().Unix() * 1000
		order := sample.Ordered(samples)
		ids, err := insertSamples(ctx, tables, order, base)
		if err != nil {
			return fmt.Errorf("after %d of %d samples: %w", len(ids), len(order), err)
		}
		_, err = fmt.Fprintf(x.stdout, "inserted %d sample messages from %s as inbox rows %d-%d (SEQN %d-%d);\n"+
			"follow them with `msgx status`, `msgx trace <MSG_ID>` or the status page (172 samples: 2 end DEAD on purpose, "+
			"the others SUCCEEDED or SKIPPED)\n", len(ids), d, ids[0], ids[len(ids)-1], base, base+int64(len(ids))-1)
		return err
	}
}

// insertSamples inserts samples into the inbox in order, sample i with
// SEQN base+i and the server's clock as its receipt time, and returns
// their inbox IDs.
func insertSamples(ctx context.Context, tables *aodb.Tables, samples []sample.Sample, base int64) ([]int64, error) {
	ids := make([]int64, 0, len(samples))
	for i, s := range samples {
		id, err := tables.InsertNow(ctx, sample.Renumbered(s.XML, base+int64(i)))
		if err != nil {
			return ids, fmt.Errorf("%s: %w", s.Name(), err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
