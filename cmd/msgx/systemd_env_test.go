package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// caPEM is a self-signed CA certificate, PEM-encoded.
func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// readEnvFile reads a systemd EnvironmentFile (KEY=value lines, # comments).
func readEnvFile(t *testing.T, path string, into map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=value", path, line)
		}
		into[k] = v
	}
}

// The environment files of deploy/systemd are a configuration msgx accepts
// in production: every name is a variable msgx reads, MSGX_ENV=production
// refuses none of the values, and the units' own settings (the state
// directory, the instance ID) are left to the units.
func TestSystemdEnvironmentFile(t *testing.T) {
	keys := map[string][]string{}
	collectKeys(reflect.TypeOf(Config{}), keys)
	known := map[string]bool{}
	for _, names := range keys {
		for _, n := range names {
			known[n] = true
		}
	}
	for _, unit := range []string{"ingest.env.example", "process-1.env.example"} {
		envm := map[string]string{}
		readEnvFile(t, "../../deploy/systemd/msgx.env.example", envm)
		for k := range envm {
			if !known[k] {
				t.Errorf("msgx.env.example sets %s, which msgx does not read", k)
			}
			if k == "MSGX_STATE_DIR" || k == "MSGX_KAFKA_INSTANCE_ID" || k == "MSGX_HTTP_ADDR" {
				t.Errorf("msgx.env.example sets %s, which each unit sets itself", k)
			}
		}
		readEnvFile(t, "../../deploy/systemd/"+unit, envm)
		// What the units add (Environment=); the secrets' files exist on
		// a real host, here the test makes them.
		envm["MSGX_STATE_DIR"] = t.TempDir()
		envm["MSGX_KAFKA_INSTANCE_ID"] = "host-process-1"
		for k, content := range map[string][]byte{"MSGX_KAFKA_TLS_CA": caPEM(t), "MSGX_KAFKA_SASL_PASSWORD_FILE": []byte("secret\n")} {
			f := t.TempDir() + "/file"
			if err := os.WriteFile(f, content, 0o600); err != nil {
				t.Fatal(err)
			}
			envm[k] = f
		}
		cfg, err := loadConfig(envm)
		if err != nil {
			t.Errorf("msgx.env.example + %s: %v", unit, err)
			continue
		}
		if cfg.Env != "production" || cfg.ShutdownTimeout.Seconds() >= 45 {
			t.Errorf("MSGX_ENV=%s, MSGX_SHUTDOWN_TIMEOUT=%s: want production, below the units' TimeoutStopSec=45s", cfg.Env, cfg.ShutdownTimeout)
		}
	}
}
