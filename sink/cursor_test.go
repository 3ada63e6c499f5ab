package sink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"msgx/sink"
	"msgx/sink/sinktest"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestReleasedSkipsOnlyTheHole(t *testing.T) {
	c := sink.Cursor{Watermark: 10, HoleSince: time.Now(), HoleEnd: 13}
	if got := c.Released(sink.Gap{From: 11, To: 13}); got != (sink.Cursor{Watermark: 13}) {
		t.Fatalf("Released = %+v", got)
	}
}

// The status report's reads of the ingest state plan, and the cursor's
// uses its primary key (inbox_hole and inbox_late_row hold a few rows and
// are read whole).
func TestCursorQueryPlans(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), sinktest.NewPG(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for name, q := range sink.CursorQueries {
		var plan []map[string]any
		if err := pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+q).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		joined := fmt.Sprint(plan)
		t.Logf("%-12s %s", name, joined)
		if name == "cursor" && !strings.Contains(joined, "inbox_cursor_pkey") {
			t.Errorf("%s: plan %s does not use inbox_cursor_pkey", name, joined)
		}
	}
}
