package bench

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"msgx/internal/testenv"
	"msgx/internal/workload"
	"msgx/sink"
)

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// BenchmarkEndToEnd loads a backlog of SIS messages (a generated day: the
// schedule, then flight operations, shared flights excluded) into the inbox
// and runs the real binary (`msgx run`, embedded persistent Kafka, real
// PostgreSQL and MariaDB) until every message is terminal. It prints the
// end-to-end rate and the rate of each stage.
func BenchmarkEndToEnd(b *testing.B) {
	msgs := workload.Day(workload.Options{Seed: 11, Flights: 2000, Ops: 18000})
	bin := filepath.Join(b.TempDir(), "msgx")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/msgx").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	for i := 0; i < b.N; i++ {
		myDSN := testenv.NewMySQL(b)
		pgDSN := testenv.NewEmptyPG(b)
		my := testenv.OpenMySQL(b, myDSN)
		insertMessages(b, my, msgs)
		logs, _ := os.Create(filepath.Join(b.TempDir(), "msgx.log"))
		cmd := exec.Command(bin, "run")
		cmd.Env = append(os.Environ(), "MSGX_PG_DSN="+pgDSN, "MSGX_MYSQL_DSN="+myDSN, "MSGX_STATE_DIR="+b.TempDir(),
			"MSGX_EMBEDDED_KAFKA_ADDR="+freeAddr(b), "MSGX_HTTP_ADDR=127.0.0.1:0", "MSGX_CUTOVER_WATERMARK=min", "MSGX_LOG_LEVEL=warn")
		cmd.Stdout, cmd.Stderr = logs, logs
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pool, err := sink.OpenPG(context.Background(), sink.Config{PGDSN: pgDSN, Timeout: 10 * time.Second, PGMaxConns: 2})
		if err != nil {
			b.Fatal(err)
		}
		n := len(msgs)
		deadline := time.Now().Add(20 * time.Minute)
		var routed time.Duration // until the router had decided every message
		for {
			var done, decided int
			_ = pool.QueryRow(context.Background(), `SELECT COUNT(*) FILTER (WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')),
				COUNT(*) FILTER (WHERE state NOT IN ('PENDING','FAILED')) FROM proc_state`).Scan(&done, &decided)
			if decided >= n && routed == 0 {
				routed = time.Since(start)
			}
			if done >= n {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d terminal", done, n)
			}
			time.Sleep(200 * time.Millisecond)
		}
		total := time.Since(start)
		var first, last time.Time
		var applied int
		_ = pool.QueryRow(context.Background(), `SELECT MIN(enqueued_at), MAX(enqueued_at) FROM proc_state`).Scan(&first, &last)
		_ = pool.QueryRow(context.Background(), `SELECT COUNT(*) FROM transition_applied`).Scan(&applied)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		pool.Close()
		b.ReportMetric(float64(n)/total.Seconds(), "msg/s")
		b.Logf("%d messages, %d flight/refdata transitions applied", n, applied)
		b.Logf("ingest: every row enqueued in %v = %.0f rows/s", last.Sub(first).Round(time.Millisecond), float64(n)/max(last.Sub(first).Seconds(), 0.001))
		b.Logf("router: every message decided %v after start = %.0f msg/s", routed.Round(time.Millisecond), float64(n)/routed.Seconds())
		b.Logf("end to end: every message terminal %v after start (start-up included) = %.0f msg/s, %.0f transitions/s",
			total.Round(time.Millisecond), float64(n)/total.Seconds(), float64(applied)/total.Seconds())
	}
}
