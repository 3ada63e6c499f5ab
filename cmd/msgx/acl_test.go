package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"msgx/internal/testenv"
	"msgx/internal/workload"
)

// aclUser is a SCRAM user on the SECURE listeners of Apache Kafka k and the
// environment of a deployment that logs in as it, with a prefix of its own.
type aclUser struct {
	name, prefix string
	env          map[string]string
}

func newACLUser(t *testing.T, k *testenv.Kafka) aclUser {
	t.Helper()
	prefix := testenv.KafkaPrefix()
	u := aclUser{name: "msgx-" + strings.TrimSuffix(prefix, "."), prefix: prefix}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.AddSCRAMUser(ctx, "SCRAM-SHA-512", u.name, "s3cret-"+u.name); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret-"+u.name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u.env = map[string]string{
		"MSGX_KAFKA_BROKERS": strings.Join(k.SecureAddrs(), ","), "MSGX_KAFKA_PREFIX": prefix,
		"MSGX_KAFKA_TLS": "true", "MSGX_KAFKA_TLS_CA": k.CA.File,
		"MSGX_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "MSGX_KAFKA_SASL_USER": u.name, "MSGX_KAFKA_SASL_PASSWORD_FILE": pw,
	}
	return u
}

// grant adds the ACLs b allows u (b's principal and host are set here).
func (u aclUser) grant(t *testing.T, k *testenv.Kafka, b *kadm.ACLBuilder) {
	t.Helper()
	adm, done, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := adm.CreateACLs(ctx, b.Allow("User:"+u.name).AllowHosts())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("granting %+v: %v", r, r.Err)
		}
	}
}

func loadDemo(t *testing.T, myDSN string) {
	t.Helper()
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
}

// leastPrivilege are the ACLs docs/operations.md#kafka-acls lists for a
// deployment with MSGX_KAFKA_PREFIX p (exactly-once on), one entry per
// (resource, operation), so that a test can leave out any one.
func leastPrivilege(p string) []struct {
	name string
	acl  *kadm.ACLBuilder
} {
	prefixed := func() *kadm.ACLBuilder { return kadm.NewACLs().ResourcePatternType(kadm.ACLPatternPrefixed) }
	return []struct {
		name string
		acl  *kadm.ACLBuilder
	}{
		{"Topic:Create", prefixed().Topics(p).Operations(kadm.OpCreate)},
		{"Topic:DescribeConfigs", prefixed().Topics(p).Operations(kadm.OpDescribeConfigs)},
		{"Topic:Read", prefixed().Topics(p).Operations(kadm.OpRead)},
		{"Topic:Write", prefixed().Topics(p).Operations(kadm.OpWrite)},
		{"Group:Read", prefixed().Groups(p).Operations(kadm.OpRead)},
		{"TransactionalId:Write", prefixed().TransactionalIDs(p).Operations(kadm.OpWrite)},
	}
}

// TestLeastPrivilege runs msgx on Apache Kafka's SASL_SSL listener (SCRAM,
// TLS) under a user granted exactly the ACLs of docs/operations.md#kafka-acls,
// enforced by the StandardAuthorizer: a codeshare-heavy inbox ends in the
// serial reference's state, its events exactly once. Then, for each of
// those ACLs left out, msgx refuses to start with one line naming the
// permission and the resource — or, for the transactional ID, which no
// start-up check can ask about, the event publisher waits with readiness
// 503 and an alert naming it, and resumes by itself once it is granted.
// Never a hang, never a message SUCCEEDED without its effect.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	k := testenv.RealKafka(t)
	t.Run("every ACL", func(t *testing.T) {
		t.Parallel()
		bin := buildBinary(t)
		u := newACLUser(t, k)
		for _, a := range leastPrivilege(u.prefix) {
			u.grant(t, k, a.acl)
		}
		// msgx logs in on the SECURE listeners; the test reads the topics
		// on the plaintext ones.
		s := newScenarioOn(t, bin, k.Addrs())
		s.prefix = u.prefix
		for key, v := range u.env {
			s.env = append(s.env, key+"="+v)
		}
		msgs := workload.Day(workload.Options{Seed: 5, Flights: 200, Ops: 1500, Codeshare: true})
		loadInbox(t, s, msgs)
		s.gateway = s.start("run")
		s.waitTerminal(len(msgs), 3*time.Minute)
		assertSerial(t, s, msgs)
	})
	for _, left := range leastPrivilege("") {
		t.Run("without "+left.name, func(t *testing.T) {
			t.Parallel()
			u := newACLUser(t, k)
			for _, a := range leastPrivilege(u.prefix) {
				if a.name != left.name {
					u.grant(t, k, a.acl)
				}
			}
			httpAddr := freeAddr(t)
			u.env["MSGX_HTTP_ADDR"] = httpAddr
			cfg, myDSN := testConfig(t, u.env)
			loadDemo(t, myDSN)
			pool := openPool(t, cfg)
			resource, op, _ := strings.Cut(left.name, ":")
			want := fmt.Sprintf("Kafka denies msgx's user %s on %s \"%s", op, resource, u.prefix)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- runGateway(ctx, cfg, testenv.Logger(t), roleAll) }()
			if resource != "TransactionalId" {
				select {
				case err := <-done:
					if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
						t.Fatalf("msgx without %s: %v, want one line starting %q", left.name, err, want)
					}
					t.Logf("refused: %v", err)
				case <-time.After(2 * time.Minute):
					t.Fatalf("msgx without %s neither refused to start nor ran within 2 minutes", left.name)
				}
				if n := count(t, pool, "SELECT COUNT(*) FROM proc_state"); n > 0 {
					t.Fatalf("%d messages decided by a refused start", n)
				}
				return
			}
			// The publisher is refused its transactional ID: it waits.
			var reasons string
			waitFor(t, "readiness naming the transactional ID", time.Minute, func() bool {
				code, body := get(t, "http://"+httpAddr+"/readyz")
				var r struct{ Reasons []string }
				_ = json.Unmarshal([]byte(body), &r)
				reasons = strings.Join(r.Reasons, "\n")
				return code == http.StatusServiceUnavailable && strings.Contains(reasons, want)
			})
			var rep struct{ Alerts []string }
			_, body := get(t, "http://"+httpAddr+"/status")
			if err := json.Unmarshal([]byte(body), &rep); err != nil || !strings.Contains(strings.Join(rep.Alerts, "\n"), want) {
				t.Fatalf("status alerts %q (%v) do not name the missing ACL; readiness: %s", rep.Alerts, err, reasons)
			}
			noSilentSuccess(t, pool)
			if n := count(t, pool, "SELECT COUNT(*) FROM msg_event"); n > 0 {
				t.Fatalf("%d events published without the transactional ID", n)
			}
			// Granted: it resumes by itself.
			u.grant(t, k, leastPrivilege(u.prefix)[5].acl)
			waitFor(t, "the outbox published once the ACL is granted", 2*time.Minute, func() bool {
				return count(t, pool, "SELECT COUNT(*) FROM event_outbox") == 0 && count(t, pool, "SELECT COUNT(*) FROM msg_event") > 0
			})
			waitFor(t, "ready", time.Minute, func() bool { c, _ := get(t, "http://"+httpAddr+"/readyz"); return c == http.StatusOK })
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("gateway stopped with %v", err)
			}
		})
	}
}
