package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"msgx/inspect/status"
	"msgx/internal/testenv"
)

// TestKafkaReadinessProbeSASL: the /readyz Kafka check authenticates like
// every other client, over TLS with SCRAM on Apache Kafka's SASL_SSL
// listener; with a wrong password, or without SASL, it reports the broker
// unreachable instead of ready.
func TestKafkaReadinessProbeSASL(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafka(t)
	u := newACLUser(t, k) // no ACL is needed to be told the cluster's metadata
	cfg, err := loadConfig(u.env)
	if err != nil {
		t.Fatal(err)
	}
	brokers := k.SecureAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := kafkaReachable(cfg, brokers)(ctx); err != nil {
		t.Fatalf("probe with the right password: %v", err)
	}
	cfg.Kafka.SASLPasswordFile, cfg.Kafka.SASLPassword = "", "wrong"
	if err := kafkaReachable(cfg, brokers)(ctx); err == nil {
		t.Fatal("probe with a wrong password reported Kafka reachable")
	}
	cfg.Kafka.SASLMechanism, cfg.Kafka.SASLUser, cfg.Kafka.SASLPassword = "", "", ""
	if err := kafkaReachable(cfg, brokers)(ctx); err == nil {
		t.Fatal("probe without SASL reported Kafka reachable")
	}
}

// TestKafkaSecurityVariables: the MSGX_KAFKA_TLS_* and _SASL_* variables
// reach the Kafka configuration, production refuses PLAIN in clear text,
// and no refusal prints the password.
func TestKafkaSecurityVariables(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prod := map[string]string{"MSGX_ENV": "production", "MSGX_KAFKA_BROKERS": "k1:9093",
		"MSGX_PG_DSN": "postgres://msgx@db:5432/msgx", "MSGX_MYSQL_DSN": "msgx:pw@tcp(aodb:3306)/aodbinterface",
		"MSGX_KAFKA_TLS": "true", "MSGX_KAFKA_TLS_SERVER_NAME": "kafka.internal",
		"MSGX_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "MSGX_KAFKA_SASL_USER": "msgx", "MSGX_KAFKA_SASL_PASSWORD_FILE": pw}
	cfg, err := loadConfig(prod)
	if err != nil {
		t.Fatalf("production configuration with TLS and SCRAM refused: %v", err)
	}
	k := cfg.Kafka
	if !k.TLS || k.TLSServerName != "kafka.internal" || k.SASLMechanism != "SCRAM-SHA-512" || k.SASLUser != "msgx" || k.SASLPasswordFile != pw {
		t.Fatalf("variables not read: %+v", k)
	}

	env := map[string]string{}
	for key, v := range prod {
		env[key] = v
	}
	delete(env, "MSGX_KAFKA_TLS")
	delete(env, "MSGX_KAFKA_TLS_SERVER_NAME")
	delete(env, "MSGX_KAFKA_SASL_PASSWORD_FILE")
	env["MSGX_KAFKA_SASL_MECHANISM"], env["MSGX_KAFKA_SASL_PASSWORD"] = "PLAIN", "hunter2-secret"
	env["MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY"] = "true"
	_, err = loadConfig(env)
	for _, want := range []string{"MSGX_KAFKA_SASL_MECHANISM=PLAIN without MSGX_KAFKA_TLS", "MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY is set but MSGX_KAFKA_TLS is false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("refusal prints the password: %v", err)
	}
}

// TestRunAgainstSASLCluster runs the whole gateway on Apache Kafka's
// SASL_SSL listener, as a SCRAM-SHA-512 user with the password in a file
// and exactly the ACLs of docs/operations.md#kafka-acls: the demo day goes
// through ingest, the processors and the publisher, and the status report
// reads the groups' lag under those ACLs too.
func TestRunAgainstSASLCluster(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafka(t)
	u := newACLUser(t, k)
	for _, a := range leastPrivilege(u.prefix) {
		u.grant(t, k, a.acl)
	}
	httpAddr := freeAddr(t)
	u.env["MSGX_HTTP_ADDR"] = httpAddr
	cfg, myDSN := testConfig(t, u.env)
	base := "http://" + httpAddr
	stop := start(t, cfg)
	defer stop()
	waitFor(t, "/readyz ready", 60*time.Second, func() bool { c, _ := get(t, base+"/readyz"); return c == 200 })

	demo, err := os.ReadFile("../../testdata/demo.sql")
	if err != nil {
		t.Fatal(err)
	}
	multi, err := sql.Open("mysql", myDSN+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Close()
	if _, err := multi.Exec(string(demo)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the demo day decided and published", 60*time.Second, func() bool {
		_, body := get(t, base+"/metrics")
		return metricValue(body, "msgx_messages_decided_total", "") >= 13 &&
			metricValue(body, "msgx_events_emitted_total", `topic="`+u.prefix+`msgx.msg"`) > 0
	})
	var rep status.Report
	waitFor(t, "the status report's group lags", 30*time.Second, func() bool {
		_, body := get(t, base+"/status")
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			return false
		}
		return rep.GroupsError == "" && len(rep.Groups) > 0
	})
	for _, g := range rep.Groups {
		if g.Error != "" {
			t.Errorf("group %s on %s: %s", g.Group, g.Topic, g.Error)
		}
	}
}

// TestStartWaitsForKafka: with Apache Kafka unreachable at start (its
// bootstrap address cut), msgx waits instead of exiting, and /readyz
// answers 503 naming the step and the dependency from the first moment;
// once Kafka answers, msgx starts by itself and processes the inbox.
func TestStartWaitsForKafka(t *testing.T) {
	t.Parallel()
	k := testenv.RealKafka(t)
	p := testenv.NewProxy(t, k.Addrs()[0])
	p.Down()
	env := onKafka(k)
	env["MSGX_KAFKA_BROKERS"] = p.Addr()
	httpAddr := freeAddr(t)
	env["MSGX_HTTP_ADDR"] = httpAddr
	cfg, myDSN := testConfig(t, env)
	cfg.Kafka.Timeout = 2 * time.Second
	loadDemo(t, myDSN)
	stop := start(t, cfg)
	defer stop()
	var reasons string
	waitFor(t, "/readyz 503 naming Kafka", 30*time.Second, func() bool {
		code, body := get(t, "http://"+httpAddr+"/readyz")
		reasons = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, "starting: ") && strings.Contains(body, "waiting for kafka")
	})
	t.Logf("while Kafka is away: %s", reasons)
	// The AODB posting early is told to come back, not that the path is
	// unknown.
	resp, err := http.Post("http://"+httpAddr+"/cminmsgs/send", "application/xml", strings.NewReader("<MSG/>"))
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("POST /cminmsgs/send while starting: %v %v, want 503 with Retry-After", resp, err)
	}
	resp.Body.Close()
	p.Up()
	pool := openPool(t, cfg)
	waitFor(t, "the demo day decided once Kafka answers", 2*time.Minute, func() bool {
		return count(t, pool, "SELECT COUNT(*) FROM proc_state WHERE state IN ('SUCCEEDED','SKIPPED','DEAD')") == 13
	})
	waitFor(t, "ready", time.Minute, func() bool { c, _ := get(t, "http://"+httpAddr+"/readyz"); return c == http.StatusOK })
}
