package kafka_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"msgx/internal/kafka"
	"msgx/internal/testenv"
)

// pki is a test certificate authority with a broker certificate for the
// name "broker.test" only (no IP address: connecting to 127.0.0.1 needs
// MSGX_KAFKA_TLS_SERVER_NAME) and a client certificate, as PEM files.
type pki struct {
	caFile, certFile, keyFile string
	broker                    tls.Certificate
	pool                      *x509.CertPool
}

func newPKI(t *testing.T, name string) pki {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	p := pki{pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.caFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	brokerDER, brokerKey := issue(2, "broker.test", x509.ExtKeyUsageServerAuth, []string{"broker.test"})
	p.broker = tls.Certificate{Certificate: [][]byte{brokerDER}, PrivateKey: brokerKey}
	clientDER, clientKey := issue(3, "msgx", x509.ExtKeyUsageClientAuth, nil)
	p.certFile = writePEM(t, dir, "client.pem", "CERTIFICATE", clientDER)
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	p.keyFile = writePEM(t, dir, "client-key.pem", "EC PRIVATE KEY", keyDER)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serverTLS is the broker side: its certificate, and client certificates
// of the CA required.
func (p pki) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.broker}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}
}

// clientTLS sets the TLS settings of a client of p's broker.
func (p pki) clientTLS(c kafka.Config) kafka.Config {
	c.TLS, c.TLSCA, c.TLSCert, c.TLSKey, c.TLSServerName = true, p.caFile, p.certFile, p.keyFile, "broker.test"
	return c
}

func startBroker(t *testing.T, opts ...kfake.Opt) []string {
	t.Helper()
	b, err := kafka.StartBroker("127.0.0.1:0", "", testenv.Logger(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

// mustValidate fails the test unless c passes start-up validation: every
// case below runs a configuration the daemon would accept.
func mustValidate(t *testing.T, c kafka.Config) kafka.Config {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("configuration refused: %v", err)
	}
	return c
}

// exercise runs every kind of client msgx builds against the broker:
// topic creation (sarama cluster admin), a produce (NewSyncProducer), a
// franz-go consumer (NewKgoClient), a goka processor with a table and an
// output (GokaOptions: consumer group, producer, topic manager), consumer
// lag (Lags) and a goka view (ReadTable).
func exercise(t *testing.T, c kafka.Config, brokers []string) {
	t.Helper()
	log := testenv.Logger(t)
	in, out, group := "sec.in", "sec.out", goka.Group("sec-group")
	if err := kafka.EnsureTopics(brokers, c, []kafka.TopicSpec{{Name: in, Partitions: 1}, {Name: out, Partitions: 1}}, log); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	prod, err := kafka.NewSyncProducer(c, brokers, "msgx-sec-test")
	if err != nil {
		t.Fatalf("NewSyncProducer: %v", err)
	}
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: in, Key: sarama.StringEncoder("k"), Value: sarama.StringEncoder("v1")}); err != nil {
		t.Fatalf("producing: %v", err)
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	if got := consume(t, c, brokers, in); got != "k=v1" {
		t.Fatalf("consumed %q from %s, want k=v1", got, in)
	}

	g := goka.DefineGroup(group,
		goka.Input(goka.Stream(in), new(codec.String), func(ctx goka.Context, msg any) {
			ctx.SetValue(msg)
			ctx.Emit(goka.Stream(out), ctx.Key(), "seen "+msg.(string))
		}),
		goka.Output(goka.Stream(out), new(codec.String)),
		goka.Persist(new(codec.String)),
	)
	p, err := goka.NewProcessor(brokers, g, kafka.GokaOptions(c, storage.MemoryBuilder(), log)...)
	if err != nil {
		t.Fatalf("goka processor: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- kafka.RunProcessor(ctx, p, "sec") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	}()
	if got := consume(t, c, brokers, out); got != "k=seen v1" {
		t.Fatalf("processor emitted %q, want k=seen v1", got)
	}
	// goka commits after the emit was acknowledged: wait for the lag to
	// reach zero.
	deadline := time.Now().Add(30 * time.Second)
	for {
		lags, err := kafka.Lags(context.Background(), c, brokers, []kafka.Group{{Group: string(group), Topics: []string{in}}})
		if err != nil {
			t.Fatalf("Lags: %v", err)
		}
		l := lags[0]
		if l.Error != "" {
			t.Fatalf("Lags row: %s", l.Error)
		}
		if l.End == 1 && l.Committed == 1 && l.Lag == 0 && l.Members == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lag did not reach 0: %+v", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var v any
	err = kafka.ReadTable(context.Background(), brokers, c, goka.GroupTable(group), new(codec.String), log, func(view *goka.View) (err error) {
		v, err = view.Get("k")
		return err
	})
	if err != nil || v != "v1" {
		t.Fatalf("ReadTable: %v, %v; want v1", v, err)
	}

	// The exactly-once publisher's clients: a transaction, and the read
	// of what it committed.
	txp, err := kafka.NewTransactionalProducer(c, brokers, "msgx-sec-test", "sec-txn", 30*time.Second)
	if err != nil {
		t.Fatalf("NewTransactionalProducer: %v", err)
	}
	defer txp.Close()
	if err := txp.BeginTxn(); err != nil {
		t.Fatalf("BeginTxn: %v", err)
	}
	if _, _, err := txp.SendMessage(&sarama.ProducerMessage{Topic: in, Key: sarama.StringEncoder("pos"), Value: sarama.StringEncoder("p1")}); err != nil {
		t.Fatalf("producing in a transaction: %v", err)
	}
	if err := txp.CommitTxn(); err != nil {
		t.Fatalf("CommitTxn: %v", err)
	}
	got, found, err := kafka.LastCommitted(context.Background(), c, brokers, in, []byte("pos"))
	if err != nil || !found || string(got) != "p1" {
		t.Fatalf("LastCommitted: %q %v %v; want p1", got, found, err)
	}
}

// consume reads the first record of topic with a franz-go client.
func consume(t *testing.T, c kafka.Config, brokers []string, topic string) string {
	t.Helper()
	cl, err := kafka.NewKgoClient(c, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("NewKgoClient: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %v (%v)", topic, err, fs.Errors())
		}
		var got string
		fs.EachRecord(func(r *kgo.Record) {
			if got == "" {
				got = string(r.Key) + "=" + string(r.Value)
			}
		})
		if got != "" {
			return got
		}
	}
}

// refused checks that every client fails against the broker, each within a
// bound, and returns their errors.
func refused(t *testing.T, c kafka.Config, brokers []string) []error {
	t.Helper()
	log := testenv.Logger(t)
	c.Timeout = 3 * time.Second
	var errs []error
	check := func(what string, err error, began time.Time) {
		t.Helper()
		if err == nil {
			t.Errorf("%s succeeded with %s", what, c.Security())
			return
		}
		if d := time.Since(began); d > 45*time.Second {
			t.Errorf("%s took %v to fail", what, d)
		}
		t.Logf("%s: %v", what, err)
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	began := time.Now()
	check("EnsureTopics", kafka.EnsureTopics(brokers, c, []kafka.TopicSpec{{Name: "sec.refused", Partitions: 1}}, log), began)

	began = time.Now()
	p, err := kafka.NewSyncProducer(c, brokers, "msgx-sec-test")
	if err == nil {
		_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "sec.refused", Value: sarama.StringEncoder("x")})
		p.Close()
	}
	check("NewSyncProducer", err, began)

	began = time.Now()
	_, err = kafka.Lags(context.Background(), c, brokers, []kafka.Group{{Group: "g", Topics: []string{"sec.refused"}}})
	check("Lags", err, began)

	began = time.Now()
	g := goka.DefineGroup("sec-refused", goka.Input(goka.Stream("sec.refused"), new(codec.String), func(goka.Context, any) {}))
	gp, err := goka.NewProcessor(brokers, g, kafka.GokaOptions(c, storage.MemoryBuilder(), log)...)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = gp.Run(ctx)
		if ctx.Err() != nil {
			err = nil // still trying when the time was up: not refused
		}
		cancel()
	}
	check("goka processor", err, began)

	began = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = kafka.ReadTable(ctx, brokers, c, goka.GroupTable("sec-refused"), new(codec.String), log, func(*goka.View) error { return nil })
	cancel()
	check("ReadTable", err, began)
	return errs
}

// TestSASL runs every client through each SASL mechanism against kfake
// with SASL required, and checks that a wrong password, an unknown user and
// the wrong mechanism are refused by every client.
func TestSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			t.Parallel()
			brokers := startBroker(t, kfake.EnableSASL(), kfake.Superuser(mech, "msgx", "s3cret pw"))
			base := testenv.KafkaConfig(brokers)
			base.SASLMechanism, base.SASLUser = mech, "msgx"

			t.Run("right credentials", func(t *testing.T) {
				c := base
				c.SASLPassword = "s3cret pw"
				exercise(t, mustValidate(t, c), brokers)
			})
			t.Run("password file", func(t *testing.T) {
				c := base
				// The trailing newline is not part of the password.
				c.SASLPasswordFile = writeFile(t, "pw", "s3cret pw\n")
				c = mustValidate(t, c)
				if got := consumeOrErr(c, brokers); got != nil {
					t.Fatalf("client with the password file: %v", got)
				}
			})
			t.Run("wrong password", func(t *testing.T) {
				c := base
				c.SASLPassword = "wrong"
				refused(t, mustValidate(t, c), brokers)
			})
			t.Run("unknown user", func(t *testing.T) {
				c := base
				c.SASLUser, c.SASLPassword = "nobody", "s3cret pw"
				if err := consumeOrErr(mustValidate(t, c), brokers); err == nil {
					t.Fatal("unknown user accepted")
				}
			})
			t.Run("no SASL", func(t *testing.T) {
				c := testenv.KafkaConfig(brokers)
				if err := consumeOrErr(c, brokers); err == nil {
					t.Fatal("client without SASL accepted")
				}
			})
		})
	}
	t.Run("wrong mechanism", func(t *testing.T) {
		t.Parallel()
		brokers := startBroker(t, kfake.EnableSASL(), kfake.Superuser(kafka.SASLScramSHA512, "msgx", "pw"))
		c := testenv.KafkaConfig(brokers)
		c.SASLMechanism, c.SASLUser, c.SASLPassword = kafka.SASLScramSHA256, "msgx", "pw"
		if err := consumeOrErr(mustValidate(t, c), brokers); err == nil {
			t.Fatal("SCRAM-SHA-256 accepted for a SCRAM-SHA-512 user")
		}
	})
}

// consumeOrErr creates a topic (sarama) and lists its offsets (franz-go):
// nil when both clients got through.
func consumeOrErr(c kafka.Config, brokers []string) error {
	c.Timeout = 3 * time.Second
	if err := kafka.EnsureTopics(brokers, c, []kafka.TopicSpec{{Name: "sec.probe", Partitions: 1}}, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	lags, err := kafka.Lags(context.Background(), c, brokers, []kafka.Group{{Group: "g", Topics: []string{"sec.probe"}}})
	if err != nil {
		return err
	}
	if lags[0].Error != "" {
		return errors.New(lags[0].Error)
	}
	return nil
}

// TestTLS runs every client over TLS with a client certificate against
// kfake requiring one, also with SCRAM on top, and checks the refusals:
// no client certificate, a broker certificate from another CA, a name the
// broker certificate does not carry, plaintext against the TLS listener.
func TestTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "msgx test")
	t.Run("client certificate", func(t *testing.T) {
		t.Parallel()
		brokers := startBroker(t, kfake.TLS(p.serverTLS()))
		exercise(t, mustValidate(t, p.clientTLS(testenv.KafkaConfig(brokers))), brokers)
	})
	t.Run("client certificate and SCRAM-SHA-512", func(t *testing.T) {
		t.Parallel()
		brokers := startBroker(t, kfake.TLS(p.serverTLS()), kfake.EnableSASL(), kfake.Superuser(kafka.SASLScramSHA512, "msgx", "pw"))
		c := p.clientTLS(testenv.KafkaConfig(brokers))
		c.SASLMechanism, c.SASLUser, c.SASLPassword = kafka.SASLScramSHA512, "msgx", "pw"
		exercise(t, mustValidate(t, c), brokers)
	})
	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		brokers := startBroker(t, kfake.TLS(p.serverTLS()))
		other := newPKI(t, "other")
		for _, tc := range []struct {
			name string
			mod  func(*kafka.Config)
			want string // in every client's error
		}{
			{"no client certificate", func(c *kafka.Config) { c.TLSCert, c.TLSKey = "", "" }, "certificate required"},
			{"broker certificate of another CA", func(c *kafka.Config) { c.TLSCA = other.caFile }, "certificate signed by unknown authority"},
			// The broker certificate names broker.test only; by default
			// the clients check the address's host.
			{"broker certificate without the address", func(c *kafka.Config) { c.TLSServerName = "" }, "127.0.0.1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := p.clientTLS(testenv.KafkaConfig(brokers))
				tc.mod(&c)
				for _, err := range refused(t, mustValidate(t, c), brokers) {
					if !strings.Contains(err.Error(), tc.want) {
						t.Errorf("%v; want %q", err, tc.want)
					}
				}
			})
		}
		t.Run("plaintext", func(t *testing.T) {
			t.Parallel()
			if err := consumeOrErr(testenv.KafkaConfig(brokers), brokers); err == nil {
				t.Error("plaintext client accepted by the TLS listener")
			}
		})
	})
}

// TestUnreadableFilesNeverFallBackToPlaintext removes the CA file after
// validation: the clients built then fail with that error instead of
// connecting without TLS to a plaintext broker that would accept them.
func TestUnreadableFilesNeverFallBackToPlaintext(t *testing.T) {
	t.Parallel()
	brokers := startBroker(t)
	p := newPKI(t, "msgx test")
	c := p.clientTLS(testenv.KafkaConfig(brokers))
	c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = kafka.SASLPlain, "msgx", writeFile(t, "pw", "pw")
	c = mustValidate(t, c)
	c.Timeout = 3 * time.Second
	if err := os.Remove(p.caFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(c.SASLPasswordFile); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"EnsureTopics": kafka.EnsureTopics(brokers, c, []kafka.TopicSpec{{Name: "t", Partitions: 1}}, testenv.Logger(t)),
		"NewSyncProducer": func() error {
			p, err := kafka.NewSyncProducer(c, brokers, "msgx-sec-test")
			if err == nil {
				p.Close()
			}
			return err
		}(),
		"Lags": func() error {
			_, err := kafka.Lags(context.Background(), c, brokers, []kafka.Group{{Group: "g", Topics: []string{"t"}}})
			return err
		}(),
	} {
		if err == nil || !strings.Contains(err.Error(), "MSGX_KAFKA_TLS_CA") || !strings.Contains(err.Error(), "MSGX_KAFKA_SASL_PASSWORD_FILE") {
			t.Errorf("%s: %v; want the unreadable files named", what, err)
		}
	}
}

// TestValidateSecurity checks start-up validation of the TLS and SASL
// settings: each problem is named by its variable.
func TestValidateSecurity(t *testing.T) {
	p := newPKI(t, "msgx test")
	other := newPKI(t, "other")
	garbage := writeFile(t, "garbage.pem", "not a certificate\n")
	broken := writeFile(t, "broken.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")})))
	pwFile := writeFile(t, "pw", "pw\n")
	emptyPW := writeFile(t, "empty", "\n")
	remote := func(mod func(*kafka.Config)) kafka.Config {
		c := testenv.KafkaConfig([]string{"kafka1:9093"})
		mod(&c)
		return c
	}
	tlsOn := func(c *kafka.Config) { c.TLS, c.TLSCA, c.TLSCert, c.TLSKey = true, p.caFile, p.certFile, p.keyFile }
	for _, tc := range []struct {
		name string
		c    kafka.Config
		want []string // substrings of the error; none: valid
	}{
		{"plaintext", remote(func(*kafka.Config) {}), nil},
		{"TLS with system roots", remote(func(c *kafka.Config) { c.TLS = true }), nil},
		{"TLS with CA and client certificate", remote(tlsOn), nil},
		{"TLS server name", remote(func(c *kafka.Config) { tlsOn(c); c.TLSServerName = "kafka.internal" }), nil},
		{"insecure skip verify (development)", remote(func(c *kafka.Config) { c.TLS, c.TLSInsecureSkipVerify = true, true }), nil},
		{"SCRAM with password file", remote(func(c *kafka.Config) {
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = "scram-sha-512", "msgx", pwFile
		}), nil},
		{"PLAIN without TLS (development)", remote(func(c *kafka.Config) { c.SASLMechanism, c.SASLUser, c.SASLPassword = "PLAIN", "msgx", "pw" }), nil},

		{"CA without TLS", remote(func(c *kafka.Config) { c.TLSCA = p.caFile }), []string{"MSGX_KAFKA_TLS_CA is set but MSGX_KAFKA_TLS is false"}},
		{"client certificate without TLS", remote(func(c *kafka.Config) { c.TLSCert, c.TLSKey = p.certFile, p.keyFile }),
			[]string{"MSGX_KAFKA_TLS_CERT is set but MSGX_KAFKA_TLS is false", "MSGX_KAFKA_TLS_KEY is set but MSGX_KAFKA_TLS is false"}},
		{"server name without TLS", remote(func(c *kafka.Config) { c.TLSServerName = "x" }), []string{"MSGX_KAFKA_TLS_SERVER_NAME is set but"}},
		{"skip verify without TLS", remote(func(c *kafka.Config) { c.TLSInsecureSkipVerify = true }), []string{"MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY is set but"}},
		{"missing CA file", remote(func(c *kafka.Config) { c.TLS, c.TLSCA = true, "/nonexistent/ca.pem" }), []string{"MSGX_KAFKA_TLS_CA: open /nonexistent/ca.pem"}},
		{"CA file without PEM", remote(func(c *kafka.Config) { c.TLS, c.TLSCA = true, garbage }), []string{"MSGX_KAFKA_TLS_CA: " + garbage + ": no PEM certificate"}},
		{"CA file with a broken certificate", remote(func(c *kafka.Config) { c.TLS, c.TLSCA = true, broken }), []string{"MSGX_KAFKA_TLS_CA: " + broken + ": certificate 1:"}},
		{"certificate without key", remote(func(c *kafka.Config) { tlsOn(c); c.TLSKey = "" }), []string{"MSGX_KAFKA_TLS_CERT is set without MSGX_KAFKA_TLS_KEY"}},
		{"key without certificate", remote(func(c *kafka.Config) { tlsOn(c); c.TLSCert = "" }), []string{"MSGX_KAFKA_TLS_KEY is set without MSGX_KAFKA_TLS_CERT"}},
		{"key of another certificate", remote(func(c *kafka.Config) { tlsOn(c); c.TLSKey = other.keyFile }),
			[]string{"MSGX_KAFKA_TLS_CERT=" + p.certFile + ", MSGX_KAFKA_TLS_KEY=" + other.keyFile + ": tls: private key does not match public key"}},
		{"missing key file", remote(func(c *kafka.Config) { tlsOn(c); c.TLSKey = "/nonexistent/key.pem" }), []string{"MSGX_KAFKA_TLS_KEY=/nonexistent/key.pem: open /nonexistent/key.pem"}},
		{"skip verify and CA", remote(func(c *kafka.Config) { tlsOn(c); c.TLSInsecureSkipVerify = true }), []string{"MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY=true ignores MSGX_KAFKA_TLS_CA"}},

		{"unknown mechanism", remote(func(c *kafka.Config) { c.SASLMechanism, c.SASLUser, c.SASLPassword = "GSSAPI", "msgx", "pw" }),
			[]string{`MSGX_KAFKA_SASL_MECHANISM="GSSAPI": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`}},
		{"no user", remote(func(c *kafka.Config) { c.SASLMechanism, c.SASLPassword = "SCRAM-SHA-256", "pw" }), []string{"MSGX_KAFKA_SASL_USER: empty"}},
		{"no password", remote(func(c *kafka.Config) { c.SASLMechanism, c.SASLUser = "SCRAM-SHA-256", "msgx" }),
			[]string{"MSGX_KAFKA_SASL_MECHANISM=SCRAM-SHA-256 needs MSGX_KAFKA_SASL_PASSWORD or MSGX_KAFKA_SASL_PASSWORD_FILE"}},
		{"password and file", remote(func(c *kafka.Config) {
			c.SASLMechanism, c.SASLUser, c.SASLPassword, c.SASLPasswordFile = "PLAIN", "msgx", "pw", pwFile
		}), []string{"MSGX_KAFKA_SASL_PASSWORD and MSGX_KAFKA_SASL_PASSWORD_FILE are both set"}},
		{"missing password file", remote(func(c *kafka.Config) {
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = "PLAIN", "msgx", "/nonexistent/pw"
		}), []string{"MSGX_KAFKA_SASL_PASSWORD_FILE: open /nonexistent/pw"}},
		{"empty password file", remote(func(c *kafka.Config) {
			c.SASLMechanism, c.SASLUser, c.SASLPasswordFile = "PLAIN", "msgx", emptyPW
		}), []string{"MSGX_KAFKA_SASL_PASSWORD_FILE: " + emptyPW + " is empty"}},
		{"credentials without mechanism", remote(func(c *kafka.Config) { c.SASLUser, c.SASLPassword = "msgx", "pw" }),
			[]string{"MSGX_KAFKA_SASL_USER is set but MSGX_KAFKA_SASL_MECHANISM is empty", "MSGX_KAFKA_SASL_PASSWORD is set but"}},
		{"embedded broker with TLS and SASL", func() kafka.Config {
			c := testenv.KafkaConfig(nil)
			c.EmbeddedAddr = "127.0.0.1:9092"
			c.TLS, c.SASLMechanism, c.SASLUser, c.SASLPassword = true, "PLAIN", "msgx", "pw"
			return c
		}(), []string{"MSGX_KAFKA_TLS and MSGX_KAFKA_SASL_MECHANISM need MSGX_KAFKA_BROKERS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "pw\n") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

func TestProductionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*kafka.Config)
		want string
	}{
		{"plaintext", func(*kafka.Config) {}, ""},
		{"SCRAM without TLS", func(c *kafka.Config) { c.SASLMechanism = "SCRAM-SHA-256" }, ""},
		{"PLAIN over TLS", func(c *kafka.Config) { c.TLS, c.SASLMechanism = true, "PLAIN" }, ""},
		{"PLAIN without TLS", func(c *kafka.Config) { c.SASLMechanism = "plain" }, "MSGX_KAFKA_SASL_MECHANISM=PLAIN without MSGX_KAFKA_TLS sends the password in clear text"},
		{"skip verify", func(c *kafka.Config) { c.TLS, c.TLSInsecureSkipVerify = true, true }, "MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY=true accepts any broker certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.KafkaConfig([]string{"kafka1:9093"})
			tc.mod(&c)
			err := errors.Join(c.ProductionErrors()...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestSecretNeverPrinted prints a configuration every way the code base
// does (fmt verbs, slog JSON, encoding/json): the password never shows.
func TestSecretNeverPrinted(t *testing.T) {
	c := testenv.KafkaConfig([]string{"kafka1:9093"})
	c.SASLMechanism, c.SASLUser, c.SASLPassword = "SCRAM-SHA-512", "msgx", "hunter2-secret"
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "kafka", c, "password", c.SASLPassword)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c.SASLPassword), buf.String(), string(js), c.Security()} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("password printed: %s", s)
		}
	}
	if !strings.Contains(string(js), `"SASLPassword":"[redacted]"`) {
		t.Errorf("JSON %s: want the password redacted", js)
	}
	if got, want := c.Security(), `SASL SCRAM-SHA-512 as "msgx"`; got != want {
		t.Errorf("Security() = %q, want %q", got, want)
	}
}
