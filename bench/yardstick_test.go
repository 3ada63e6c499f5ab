package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The yardstick of a backlog's rate is PostgreSQL's select-only rate,
// `pgbench -S -c 2 -j 2 -T 5`: two clients on the two cores, each
// transaction one primary-key read. Both it and msgx's backlog are bound
// by the CPU, so the ratio msgx msg/s ÷ select tps cancels the machine's
// speed (three runs of the same code: ±8 %). The single-row commit rate it
// replaces waited for the disk's flush, which moved 2.9k–8.7k commits/s
// from one run to the next here: a ratio to it measured the disk.
//
// selectScale is pgbench's scale factor: 10 is a million accounts (~150
// MB with their index), initialised once per run of the package in a
// scratch database, which TestMain drops.
const selectScale = 10

var yardstick struct {
	once     sync.Once
	err      error
	name     string // the scratch database
	dsn      string
	mu       sync.Mutex
	readings []float64
}

var tpsRE = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// selectRate runs the yardstick for five seconds and returns its
// transactions per second.
func selectRate(b *testing.B) float64 {
	b.Helper()
	yardstick.once.Do(initYardstick)
	if yardstick.err != nil {
		b.Fatal(yardstick.err)
	}
	// libpq takes the URI as the database name.
	out, err := exec.Command("pgbench", "-n", "-S", "-c", "2", "-j", "2", "-T", "5", yardstick.dsn).CombinedOutput()
	if err != nil {
		b.Fatalf("pgbench -S (installed with PostgreSQL's client tools): %v\n%s", err, out)
	}
	m := tpsRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("no tps in the output of pgbench:\n%s", out)
	}
	tps, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatalf("pgbench's tps %q: %v", m[1], err)
	}
	yardstick.mu.Lock()
	yardstick.readings = append(yardstick.readings, tps)
	yardstick.mu.Unlock()
	return tps
}

// initYardstick creates the scratch database and fills it (pgbench -i).
func initYardstick() {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "msgx_bench_select_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgAdminDSN())
	if err != nil {
		yardstick.err = fmt.Errorf("connecting to PostgreSQL for the pgbench database: %w", err)
		return
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		yardstick.err = fmt.Errorf("creating the pgbench database: %w", err)
		return
	}
	yardstick.name = name
	cfg, err := pgx.ParseConfig(pgAdminDSN())
	if err != nil {
		yardstick.err = err
		return
	}
	yardstick.dsn = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	if out, err := exec.Command("pgbench", "-i", "-q", "-s", strconv.Itoa(selectScale), yardstick.dsn).CombinedOutput(); err != nil {
		yardstick.err = fmt.Errorf("pgbench -i -s %d (installed with PostgreSQL's client tools): %v\n%s", selectScale, err, out)
	}
}

// dropYardstick drops the scratch database, if one was made.
func dropYardstick() {
	if yardstick.name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgAdminDSN())
	if err != nil {
		fmt.Printf("dropping %s: %v\n", yardstick.name, err)
		return
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+yardstick.name+" WITH (FORCE)"); err != nil {
		fmt.Printf("dropping %s: %v\n", yardstick.name, err)
	}
}

// yardstickSummary says what the yardstick read over the run, for the line
// above the table: the machine's speed at that time.
func yardstickSummary() string {
	yardstick.mu.Lock()
	defer yardstick.mu.Unlock()
	r := slices.Clone(yardstick.readings)
	if len(r) == 0 {
		return "pgbench select-only not run"
	}
	slices.Sort(r)
	return fmt.Sprintf("pgbench select-only (-S -c 2 -j 2 -T 5, scale %d): median %s tps, %s–%s over %d readings",
		selectScale, thousands(int(median(r))), thousands(int(r[0])), thousands(int(r[len(r)-1])), len(r))
}

// selectPair is the yardstick read before and after one backlog.
type selectPair struct{ before, after float64 }

func (p selectPair) mean() float64 { return (p.before + p.after) / 2 }

// median is the median of xs (the mean of the middle two of an even
// count); NaN when xs is empty or holds a NaN.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return nan
	}
	s := slices.Clone(xs)
	for _, x := range s {
		if x != x {
			return nan
		}
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
