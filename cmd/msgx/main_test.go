package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"msgx/ingest"
	"msgx/internal/testenv"
	"msgx/sink"
	"msgx/sink/sinktest"
)

// TestMain stops the Apache Kafka the package's tests started
// (testenv.RealKafka) after the last one.
func TestMain(m *testing.M) { testenv.Main(m) }

// onKafka is the environment of a deployment on Apache Kafka k, shared
// with other tests: a prefix of its own for its topics, groups and
// transactional ID, and the cluster's replication.
func onKafka(k *testenv.Kafka) map[string]string {
	return map[string]string{
		"MSGX_KAFKA_BROKERS":     strings.Join(k.Addrs(), ","),
		"MSGX_KAFKA_PREFIX":      testenv.KafkaPrefix(),
		"MSGX_KAFKA_REPLICATION": strconv.Itoa(len(k.Nodes)),
	}
}

// brokersOf are the bootstrap addresses cfg uses: its cluster's, or its
// embedded broker's.
func brokersOf(cfg Config) []string {
	if cfg.Kafka.Embedded() {
		return []string{cfg.Kafka.EmbeddedAddr}
	}
	return cfg.Kafka.Brokers
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// testConfig is the daemon's configuration against fresh test databases and
// an embedded broker (kfake) persisting under a temporary state directory:
// msgx as `make run` runs it. A test of a Kafka claim passes
// onKafka(testenv.RealKafka(t)) in extra and runs on Apache Kafka
// (serial, crash, exactlyonce, rebuild, bind, acl, ksec).
func testConfig(t *testing.T, extra map[string]string) (Config, string) {
	t.Helper()
	envm, myDSN := testEnviron(t, extra)
	cfg, err := loadConfig(envm)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, myDSN
}

// testEnviron is testConfig's environment (MSGX_* variables), for tests
// that run msgx as a command.
func testEnviron(t *testing.T, extra map[string]string) (map[string]string, string) {
	t.Helper()
	myDSN := testenv.NewMySQL(t)
	envm := map[string]string{
		"MSGX_PG_DSN":              testenv.NewEmptyPG(t),
		"MSGX_MYSQL_DSN":           myDSN,
		"MSGX_STATE_DIR":           t.TempDir(),
		"MSGX_EMBEDDED_KAFKA_ADDR": freeAddr(t),
		"MSGX_HTTP_ADDR":           "127.0.0.1:0",
		"MSGX_CUTOVER_WATERMARK":   "min",
		"MSGX_POLL_INTERVAL":       "50ms",
		// Real clock, flights of 2021: no daily sweep in the middle.
		"MSGX_HISTORY_RETENTION": "0",
	}
	for k, v := range extra {
		envm[k] = v
	}
	return envm, myDSN
}

// start runs the whole gateway in-process and returns its stop function.
func start(t *testing.T, cfg Config) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runGateway(ctx, cfg, testenv.Logger(t), roleAll) }()
	return func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway stopped with %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("gateway did not stop")
		}
	}
}

func inboxIDs(t *testing.T, brokers []string, n int) []int64 {
	t.Helper()
	var out []int64
	for _, r := range testenv.ReadTopic(t, brokers, "msgx.inbox", n, 20*time.Second) {
		var rec ingest.Record
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.MsgID)
	}
	return out
}

func TestRestartKeepsTopicsOffsetsAndCursor(t *testing.T) {
	cfg, myDSN := testConfig(t, nil)
	my := sinktest.OpenMySQL(t, myDSN)
	brokers := []string{cfg.Kafka.EmbeddedAddr}
	for i := 0; i < 5; i++ {
		testenv.InsertInbox(t, my, "<MSG/>")
	}
	stop := start(t, cfg)
	if got := inboxIDs(t, brokers, 5); !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("first run topic %v", got)
	}
	stop()

	for i := 0; i < 3; i++ {
		testenv.InsertInbox(t, my, "<MSG/>")
	}
	stop = start(t, cfg)
	defer stop()
	if got := inboxIDs(t, brokers, 8); !reflect.DeepEqual(got, []int64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("after restart topic %v: the embedded broker lost records or the cursor was reset", got)
	}
	if n := testenv.EndOffset(t, brokers, "msgx.inbox"); n != 8 {
		t.Fatalf("topic has %d records after restart, want 8", n)
	}
	// The router's group offset and table survived: message 1, decided in
	// the first run, is read from the table and was not decided again.
	pg := openPool(t, cfg)
	var first, again time.Time
	waitRow(t, pg, 8)
	if err := pg.QueryRow(context.Background(), "SELECT updated_at FROM proc_state WHERE msg_id = 1").Scan(&first); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := runCommand(context.Background(), cfg, "table", []string{"get", "messages", "1"}, &out, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"state": "DEAD"`) || !strings.Contains(out.String(), `"decision": "DEAD"`) || !strings.Contains(out.String(), `"errorClass": "MALFORMED"`) {
		t.Fatalf("table get messages 1:\n%s", out.String())
	}
	if err := pg.QueryRow(context.Background(), "SELECT updated_at FROM proc_state WHERE msg_id = 1").Scan(&again); err != nil || !again.Equal(first) {
		t.Fatalf("message 1 was processed again after restart: %v → %v (%v)", first, again, err)
	}
}

func openPool(t *testing.T, cfg Config) *pgxpool.Pool {
	t.Helper()
	pool, err := sink.OpenPG(context.Background(), cfg.DB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// waitRow waits until message id has a terminal or routed row.
func waitRow(t *testing.T, pool *pgxpool.Pool, id int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var state string
		err := pool.QueryRow(context.Background(), "SELECT state FROM proc_state WHERE msg_id = $1", id).Scan(&state)
		if err == nil && state != "PENDING" && state != "FAILED" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("message %d was never decided", id)
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MSGX_POLL_INTERVAL": "soon"}, "MSGX_POLL_INTERVAL"},
		{map[string]string{"MSGX_CLAIM_BATCH": "many"}, "MSGX_CLAIM_BATCH"},
		{map[string]string{"MSGX_CLAIM_BATCH": "0"}, "MSGX_CLAIM_BATCH"},
		{map[string]string{"MSGX_KAFKA_ACKS": "1"}, "MSGX_KAFKA_ACKS"},
		{map[string]string{"MSGX_KAFKA_IDEMPOTENT": "false"}, "MSGX_KAFKA_IDEMPOTENT"},
		{map[string]string{"MSGX_KAFKA_MAX_IN_FLIGHT": "5"}, "MSGX_KAFKA_MAX_IN_FLIGHT"},
		{map[string]string{"MSGX_KAFKA_VERSION": "1.0.0"}, "MSGX_KAFKA_VERSION=1.0.0 is older than 2.3.0"},
		{map[string]string{"MSGX_CUTOVER_WATERMARK": "yesterday"}, "MSGX_CUTOVER_WATERMARK"},
		{map[string]string{"MSGX_AIRPORT_TZ": "Mars/Olympus"}, "MSGX_AIRPORT_TZ"},
		{map[string]string{"MSGX_PG_DSN": "postgres://:x"}, "MSGX_PG_DSN"},
		{map[string]string{"MSGX_MAX_COMMIT_DELAY": "-1s"}, "MSGX_MAX_COMMIT_DELAY"},
		{map[string]string{"MSGX_HOLE_PROBE": "perhaps"}, "MSGX_HOLE_PROBE"},
		{map[string]string{"MSGX_BACKOFF": "1s,2s,4s,8s,16s"}, "MSGX_BACKOFF has 5 tiers but MSGX_MAX_ATTEMPTS=5"},
		{map[string]string{"MSGX_BACKOFF": "1s,2s"}, "MSGX_BACKOFF has 2 tiers"},
		{map[string]string{"MSGX_DB_TIMEOUT": "forever"}, "MSGX_DB_TIMEOUT"},
		{map[string]string{"MSGX_MYSQL_DSN": "root@tcp(127.0.0.1:3306"}, "MSGX_MYSQL_DSN"},
		{map[string]string{"MSGX_HTTP_MAX_BODY": "1048576"}, "MSGX_HTTP_MAX_BODY=1048576 exceeds the largest message a msgx.inbox record carries"},
		{map[string]string{"MSGX_KAFKA_MAX_MESSAGE_BYTES": "100000", "MSGX_HTTP_MAX_BODY": "99000"}, "MSGX_HTTP_MAX_BODY=99000 exceeds"},
		{map[string]string{"MSGX_CLAIM_MAX_BYTES": "-1"}, "MSGX_CLAIM_MAX_BYTES"},
		{map[string]string{"MSGX_LOCK_RETRY": "0s"}, "MSGX_LOCK_RETRY"},
		{map[string]string{"MSGX_HTTP_MAX_CONCURRENT": "0"}, "MSGX_HTTP_MAX_CONCURRENT"},
		{map[string]string{"MSGX_HTTP_READ_TIMEOUT": "0s"}, "MSGX_HTTP_READ_TIMEOUT"},
		{map[string]string{"MSGX_KAFKA_PREFIX": "a b."}, `MSGX_KAFKA_PREFIX: "a b." has ' '`},
		{map[string]string{"MSGX_TOPIC_MSG": "flight events"}, `topic name: "flight events" has ' '`},
		{map[string]string{"MSGX_EXACTLY_ONCE": "true", "MSGX_PUBLISH_TXN_TIMEOUT": "20m"}, "MSGX_PUBLISH_TXN_TIMEOUT=20m0s: must be 1s..15m"},
		{map[string]string{"MSGX_EXACTLY_ONCE": "true", "MSGX_PUBLISH_TXN_TIMEOUT": "5s"}, "MSGX_PUBLISH_TXN_TIMEOUT=5s is shorter than MSGX_KAFKA_TIMEOUT=10s"},
		{map[string]string{"MSGX_EXACTLY_ONCE": "true", "MSGX_TOPIC_PUBLISHER_POSITION": "a b"}, `MSGX_TOPIC_PUBLISHER_POSITION: "a b" has ' '`},
		{map[string]string{"MSGX_ENV": "production"}, "MSGX_KAFKA_BROKERS is empty"},
		{map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_BROKERS": "k1:9092"}, "MSGX_PG_DSN is the development default"},
		{map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_BROKERS": "k1:9092", "MSGX_PG_DSN": "postgres://p@db/msgx"}, "MSGX_MYSQL_DSN is the development default"},
	} {
		_, err := loadConfig(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v does not name %s", tc.env, err, tc.want)
		}
	}
	defaults, err := loadConfig(map[string]string{})
	if err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	// The manual promises work resumes within 5 s of PostgreSQL coming
	// back: both locks are retried at least that often (sink's
	// TestAcquireLockRetriesOutagesEveryInterval shows the interval holds
	// through an outage of any length).
	if defaults.DB.LockRetry > 5*time.Second || defaults.Ingest.PollInterval > 5*time.Second {
		t.Fatalf("lock retry intervals %v / %v exceed 5 s", defaults.DB.LockRetry, defaults.Ingest.PollInterval)
	}
	// A body limit the record limit can carry is accepted.
	if _, err := loadConfig(map[string]string{"MSGX_KAFKA_MAX_MESSAGE_BYTES": "2000000", "MSGX_HTTP_MAX_BODY": "1048576"}); err != nil {
		t.Fatalf("a body limit below the record limit was rejected: %v", err)
	}
	prod := map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_BROKERS": "k1:9092,k2:9092",
		"MSGX_PG_DSN": "postgres://msgx@db:5432/msgx", "MSGX_MYSQL_DSN": "msgx:pw@tcp(aodb:3306)/aodbinterface"}
	if _, err := loadConfig(prod); err != nil {
		t.Fatalf("a complete production configuration was rejected: %v", err)
	}
	// Each refusal is one clear line naming its variable.
	_, err = loadConfig(map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_ACKS": "1"})
	lines := splitErrors(err)
	if len(lines) != 4 {
		t.Fatalf("want 4 refusals (embedded kafka, two DSNs, acks), got %q", lines)
	}
}

// Every variable has its row in the configuration tables of the reference
// (docs/reference.md, which the manual's chapter 14 and the README point
// to; TestReferenceIsGenerated keeps it what the code generates).
func TestManualDocumentsEveryVariable(t *testing.T) {
	ref, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(ref), `<a id="configuration"></a>`)
	if !ok {
		t.Fatal("docs/reference.md has no configuration section")
	}
	table, _, _ = strings.Cut(table, `<a id="commands"></a>`)
	manual, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(manual), `<a id="configuration"></a>`) || !strings.Contains(string(manual), "(reference.md#configuration)") {
		t.Error("docs/operations.md has no configuration chapter pointing to docs/reference.md")
	}
	keys := map[string][]string{}
	collectKeys(reflect.TypeOf(Config{}), keys)
	for _, names := range keys {
		for _, name := range names {
			if !strings.Contains(table, "| `"+name+"` |") {
				t.Errorf("the reference's configuration tables do not document %s", name)
			}
		}
	}
}

// The README starts with exactly the two set-up commands, and the links
// from the README and the manuals into each other's sections lead to an
// anchor that exists.
func TestREADMEAndManualLinks(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile("../../" + p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")
	if !strings.HasPrefix(readme, "# msgx — airport message gateway\n\n```sh\nmake run    #") ||
		!strings.Contains(readme, "\nmake test   #") || strings.Count(strings.SplitN(readme, "```", 3)[1], "\nmake ") != 2 {
		t.Errorf("the README does not start with the two set-up commands:\n%.300s", readme)
	}
	docs := map[string]string{"README.md": readme, "docs/design.md": read("docs/design.md"), "docs/operations.md": read("docs/operations.md"),
		"docs/reference.md": read("docs/reference.md")}
	// Anchors: explicit <a id>, and GitHub's for headings.
	anchors := map[string]map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#+ (.+)$`)
	for name, text := range docs {
		anchors[name] = map[string]bool{}
		for _, m := range regexp.MustCompile(`<a id="([^"]+)">`).FindAllStringSubmatch(text, -1) {
			anchors[name][m[1]] = true
		}
		for _, m := range heading.FindAllStringSubmatch(text, -1) {
			a := strings.ToLower(m[1])
			a = regexp.MustCompile("[^a-z0-9 _-]").ReplaceAllString(a, "")
			anchors[name][strings.ReplaceAll(a, " ", "-")] = true
		}
	}
	link := regexp.MustCompile(`\]\(((?:\.\./|docs/)?(?:README\.md|design\.md|operations\.md|reference\.md))?#([^)]+)\)`)
	for name, text := range docs {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := name
			switch p := m[1]; {
			case p == "":
			case strings.HasSuffix(p, "README.md"):
				target = "README.md"
			case strings.HasSuffix(p, "design.md"):
				target = "docs/design.md"
			case strings.HasSuffix(p, "reference.md"):
				target = "docs/reference.md"
			default:
				target = "docs/operations.md"
			}
			if !anchors[target][m[2]] {
				t.Errorf("%s links to %s#%s, which has no such anchor", name, target, m[2])
			}
		}
	}
	if n := strings.Count(readme, "\n"); n > 170 {
		t.Errorf("the README has %d lines: keep it to the first ten minutes, the reference goes to docs/operations.md", n)
	}
}

// A variable read by several components' Configs (MSGX_TOPIC_INBOX by
// ingest and the router, …) has one default.
func TestSharedVariablesHaveOneDefault(t *testing.T) {
	defaults := map[string]map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Time{}) {
				walk(f.Type)
				continue
			}
			if tag := f.Tag.Get("env"); tag != "" {
				name, _, _ := strings.Cut(tag, ",")
				if defaults[name] == nil {
					defaults[name] = map[string]bool{}
				}
				defaults[name][f.Tag.Get("envDefault")] = true
			}
		}
	}
	walk(reflect.TypeOf(Config{}))
	for name, ds := range defaults {
		if len(ds) > 1 {
			t.Errorf("%s has %d defaults: %v", name, len(ds), ds)
		}
	}
	if len(defaults["MSGX_TOPIC_FLIGHT_TRANSITIONS"]) != 1 {
		t.Error("MSGX_TOPIC_FLIGHT_TRANSITIONS not found")
	}
}

// With the embedded Kafka inside `msgx run`, which keeps no transaction
// log, msg events are at least once unless MSGX_EXACTLY_ONCE asks for
// transactions; against a Kafka of its own, exactly once by default.
func TestExactlyOnceDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"MSGX_EXACTLY_ONCE": "true"}, true},
		{map[string]string{"MSGX_KAFKA_BROKERS": "kafka1:9092"}, true},
		{map[string]string{"MSGX_KAFKA_BROKERS": "kafka1:9092", "MSGX_EXACTLY_ONCE": "false"}, false},
	} {
		cfg, err := loadConfig(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Publisher.ExactlyOnce != tc.want {
			t.Errorf("%v: exactly once %v, want %v", tc.env, cfg.Publisher.ExactlyOnce, tc.want)
		}
	}
}
