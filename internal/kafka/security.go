package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms msgx speaks (MSGX_KAFKA_SASL_MECHANISM).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Secret is a setting that must never be printed: fmt, slog and JSON show
// it redacted. string(s) is the value.
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoding/json and friends from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// security is what every client needs to reach the cluster: the TLS
// configuration (nil: plaintext) and the SASL credentials (mechanism "":
// none). Config.security builds it, the one place that reads the files, for
// both client libraries (secureSarama, NewKgoClient).
type security struct {
	tls       *tls.Config
	mechanism string
	user      string
	password  string
}

// security reads the certificate and password files and builds the
// connection settings. Validate reports the same errors at start-up; here
// they only happen when a file changed since.
func (c Config) security() (security, error) {
	var s security
	var errs []error
	if c.TLS {
		tc, tlsErrs := c.tlsConfig()
		s.tls = tc
		errs = append(errs, tlsErrs...)
	}
	if c.SASLMechanism != "" {
		s.mechanism = strings.ToUpper(c.SASLMechanism)
		switch s.mechanism {
		case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			errs = append(errs, fmt.Errorf("MSGX_KAFKA_SASL_MECHANISM=%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism))
		}
		s.user = c.SASLUser
		pw, err := c.password()
		s.password = pw
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

func (c Config) tlsConfig() (*tls.Config, []error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.TLSInsecureSkipVerify, // #nosec G402 -- operator's explicit choice, refused in production.
	}
	var errs []error
	if c.TLSCA != "" {
		pool, err := readCAs(c.TLSCA)
		if err != nil {
			errs = append(errs, fmt.Errorf("MSGX_KAFKA_TLS_CA: %w", err))
		}
		tc.RootCAs = pool
	}
	switch {
	case c.TLSCert != "" && c.TLSKey != "":
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("MSGX_KAFKA_TLS_CERT=%s, MSGX_KAFKA_TLS_KEY=%s: %w", c.TLSCert, c.TLSKey, err))
		} else {
			tc.Certificates = []tls.Certificate{pair}
		}
	case c.TLSCert != "":
		errs = append(errs, errors.New("MSGX_KAFKA_TLS_CERT is set without MSGX_KAFKA_TLS_KEY: the client certificate needs its private key"))
	case c.TLSKey != "":
		errs = append(errs, errors.New("MSGX_KAFKA_TLS_KEY is set without MSGX_KAFKA_TLS_CERT: the private key needs its client certificate"))
	}
	return tc, errs
}

// readCAs parses every certificate of a PEM file. x509.CertPool's own
// AppendCertsFromPEM skips what it cannot parse; a CA file with a broken
// certificate would then fail only at the first connection.
func readCAs(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// password is the SASL password, from the environment or its file.
func (c Config) password() (string, error) {
	switch {
	case c.SASLPassword != "" && c.SASLPasswordFile != "":
		return "", errors.New("MSGX_KAFKA_SASL_PASSWORD and MSGX_KAFKA_SASL_PASSWORD_FILE are both set: keep one")
	case c.SASLPassword != "":
		return string(c.SASLPassword), nil
	case c.SASLPasswordFile != "":
		data, err := os.ReadFile(c.SASLPasswordFile)
		if err != nil {
			return "", fmt.Errorf("MSGX_KAFKA_SASL_PASSWORD_FILE: %w", err)
		}
		// Files written by editors and `echo` end in a newline that is not
		// part of the password.
		pw := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
		if pw == "" {
			return "", fmt.Errorf("MSGX_KAFKA_SASL_PASSWORD_FILE: %s is empty", c.SASLPasswordFile)
		}
		return pw, nil
	default:
		return "", fmt.Errorf("MSGX_KAFKA_SASL_MECHANISM=%s needs MSGX_KAFKA_SASL_PASSWORD or MSGX_KAFKA_SASL_PASSWORD_FILE", c.SASLMechanism)
	}
}

// securityErrors is Validate's part for TLS and SASL: every setting is
// consistent, every file readable and parsed, so that a client is never
// built, hours later, from a broken or half-set configuration.
func (c Config) securityErrors() []error {
	var errs []error
	if !c.TLS {
		for _, s := range []struct {
			name string
			set  bool
		}{
			{"MSGX_KAFKA_TLS_CA", c.TLSCA != ""},
			{"MSGX_KAFKA_TLS_CERT", c.TLSCert != ""},
			{"MSGX_KAFKA_TLS_KEY", c.TLSKey != ""},
			{"MSGX_KAFKA_TLS_SERVER_NAME", c.TLSServerName != ""},
			{"MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY", c.TLSInsecureSkipVerify},
		} {
			if s.set {
				errs = append(errs, fmt.Errorf("%s is set but MSGX_KAFKA_TLS is false: set MSGX_KAFKA_TLS=true to use TLS", s.name))
			}
		}
	} else {
		if c.TLSInsecureSkipVerify && c.TLSCA != "" {
			errs = append(errs, errors.New("MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY=true ignores MSGX_KAFKA_TLS_CA: keep one"))
		}
		_, tlsErrs := c.tlsConfig()
		errs = append(errs, tlsErrs...)
	}
	switch strings.ToUpper(c.SASLMechanism) {
	case "":
		for _, s := range []struct {
			name string
			set  bool
		}{
			{"MSGX_KAFKA_SASL_USER", c.SASLUser != ""},
			{"MSGX_KAFKA_SASL_PASSWORD", c.SASLPassword != ""},
			{"MSGX_KAFKA_SASL_PASSWORD_FILE", c.SASLPasswordFile != ""},
		} {
			if s.set {
				errs = append(errs, fmt.Errorf("%s is set but MSGX_KAFKA_SASL_MECHANISM is empty: set PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.name))
			}
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASLUser == "" {
			errs = append(errs, fmt.Errorf("MSGX_KAFKA_SASL_USER: empty, but MSGX_KAFKA_SASL_MECHANISM=%s needs a user", c.SASLMechanism))
		}
		if _, err := c.password(); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("MSGX_KAFKA_SASL_MECHANISM=%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.SASLMechanism))
	}
	if c.Embedded() && (c.TLS || c.SASLMechanism != "") {
		errs = append(errs, errors.New("MSGX_KAFKA_TLS and MSGX_KAFKA_SASL_MECHANISM need MSGX_KAFKA_BROKERS: the embedded Kafka speaks plaintext without authentication"))
	}
	return errs
}

// ProductionErrors refuses, for MSGX_ENV=production, the security settings
// that are only fit for a test cluster.
func (c Config) ProductionErrors() []error {
	var errs []error
	if c.TLS && c.TLSInsecureSkipVerify {
		errs = append(errs, errors.New("MSGX_ENV=production: MSGX_KAFKA_TLS_INSECURE_SKIP_VERIFY=true accepts any broker certificate; set MSGX_KAFKA_TLS_CA instead"))
	}
	if strings.EqualFold(c.SASLMechanism, SASLPlain) && !c.TLS {
		errs = append(errs, errors.New("MSGX_ENV=production: MSGX_KAFKA_SASL_MECHANISM=PLAIN without MSGX_KAFKA_TLS sends the password in clear text; enable TLS or use SCRAM"))
	}
	return errs
}

// Security describes how the clients connect, for logs and error messages;
// it never includes the password.
func (c Config) Security() string {
	var parts []string
	if c.TLS {
		t := "TLS"
		if c.TLSCert != "" {
			t += " with client certificate"
		}
		if c.TLSInsecureSkipVerify {
			t += " (broker certificate not verified)"
		}
		parts = append(parts, t)
	}
	if c.SASLMechanism != "" {
		parts = append(parts, fmt.Sprintf("SASL %s as %q", strings.ToUpper(c.SASLMechanism), c.SASLUser))
	}
	if len(parts) == 0 {
		return "plaintext"
	}
	return strings.Join(parts, ", ")
}

// secureSarama applies the TLS and SASL settings to a sarama configuration.
// Should a file have become unreadable since Validate, the client fails
// every connection with that error: it never falls back to plaintext or to
// no authentication.
func (c Config) secureSarama(sc *sarama.Config) {
	s, err := c.security()
	if err != nil {
		sc.Net.Proxy.Enable = true
		sc.Net.Proxy.Dialer = failDialer{fmt.Errorf("kafka client security settings: %w", err)}
		return
	}
	if s.tls != nil {
		sc.Net.TLS.Enable = true
		sc.Net.TLS.Config = s.tls
	}
	if s.mechanism == "" {
		return
	}
	sc.Net.SASL.Enable = true
	sc.Net.SASL.Handshake = true
	sc.Net.SASL.Version = sarama.SASLHandshakeV1
	sc.Net.SASL.Mechanism = sarama.SASLMechanism(s.mechanism)
	sc.Net.SASL.User = s.user
	sc.Net.SASL.Password = s.password
	switch s.mechanism {
	case SASLScramSHA256:
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{sha512: false} }
	case SASLScramSHA512:
		sc.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{sha512: true} }
	}
}

type failDialer struct{ err error }

func (d failDialer) Dial(string, string) (net.Conn, error) { return nil, d.err }

// scramClient is sarama's SCRAM conversation on franz-go's implementation
// (RFC 5802, with the server's signature checked), so both client
// libraries share one.
type scramClient struct {
	sha512  bool
	session sasl.Session
	first   []byte
	started bool
	done    bool
}

// Begin implements sarama.SCRAMClient.
func (s *scramClient) Begin(user, password, authzID string) error {
	auth := scram.Auth{Zid: authzID, User: user, Pass: password}
	mech := auth.AsSha256Mechanism()
	if s.sha512 {
		mech = auth.AsSha512Mechanism()
	}
	session, first, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		return err
	}
	s.session, s.first = session, first
	return nil
}

// Step implements sarama.SCRAMClient: the first call returns the
// client-first message, the next ones answer the server's challenges.
func (s *scramClient) Step(challenge string) (string, error) {
	if !s.started {
		s.started = true
		return string(s.first), nil
	}
	done, resp, err := s.session.Challenge([]byte(challenge))
	if err != nil {
		return "", err
	}
	s.done = done
	return string(resp), nil
}

// Done implements sarama.SCRAMClient.
func (s *scramClient) Done() bool { return s.done }

// NewKgoClient returns a franz-go client for the cluster with the TLS and
// SASL settings, its dial timeout Kafka.Timeout: the one franz-go client
// constructor (consumer lag; the event publisher's reads of what its
// transactions committed; tests read topics with it). opts add to them.
func NewKgoClient(c Config, brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	s, err := c.security()
	if err != nil {
		return nil, fmt.Errorf("kafka client security settings: %w", err)
	}
	base := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	if c.Timeout > 0 {
		base = append(base, kgo.DialTimeout(c.Timeout))
	}
	if s.tls != nil {
		base = append(base, kgo.DialTLSConfig(s.tls))
	}
	switch s.mechanism {
	case SASLPlain:
		base = append(base, kgo.SASL(plain.Auth{User: s.user, Pass: s.password}.AsMechanism()))
	case SASLScramSHA256:
		base = append(base, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()))
	case SASLScramSHA512:
		base = append(base, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating Kafka client: %w", err)
	}
	return cl, nil
}
