package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for one test with crypto/x509: it
// issues server certificates for 127.0.0.1 and localhost and client
// certificates, written as PEM files under the test's temporary directory.
type CA struct {
	// File is the CA certificate's PEM file (curl --cacert, a client CA).
	File string
	// Pool trusts the CA (a Go client's RootCAs).
	Pool *x509.CertPool

	t      testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// Issued is a certificate the CA issued and its key, as PEM files.
type Issued struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
	// Pair is the certificate and key for a Go client or server.
	Pair tls.Certificate
}

// SPKIHash is the base64 SHA-256 of the certificate's public key, as
// Chromium's --ignore-certificate-errors-spki-list wants it.
func (i Issued) SPKIHash() string {
	sum := sha256.Sum256(i.Cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := ecKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.serial.Store(1)
	ca.Pool.AddCert(cert)
	ca.File = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(cn string) Issued {
	return ca.issue(cn, x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate.
func (ca *CA) Client(cn string) Issued {
	return ca.issue(cn, x509.ExtKeyUsageClientAuth)
}

func (ca *CA) issue(cn string, usage x509.ExtKeyUsage) Issued {
	t := ca.t
	t.Helper()
	key := ecKey(t)
	serial := ca.serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	name := cn + "-" + big.NewInt(serial).String()
	out := Issued{Cert: cert,
		CertFile: ca.write(name+".crt", "CERTIFICATE", der),
		KeyFile:  ca.write(name+".key", "EC PRIVATE KEY", kder)}
	out.Pair, err = tls.LoadX509KeyPair(out.CertFile, out.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (ca *CA) write(name, typ string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Curl runs curl with args (-sS and a 20 s bound added) and returns the
// HTTP status it printed with -w and the body, failing t when curl cannot
// run or fails (a refused handshake, a connection error). Tests use the
// real curl an operator would use against msgx.
func Curl(t testing.TB, args ...string) (code int, body string) {
	t.Helper()
	code, body, err := TryCurl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// TryCurl is Curl returning curl's failure instead.
func TryCurl(args ...string) (code int, body string, err error) {
	path, err := exec.LookPath("curl")
	if err != nil {
		return 0, "", fmt.Errorf("curl is not installed (apt-get install -y curl, as .ci/run does): %w", err)
	}
	out, err := exec.Command(path, append([]string{"-sS", "--max-time", "20", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		return 0, string(out), fmt.Errorf("curl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	code, err = strconv.Atoi(s[i+1:])
	if err != nil {
		return 0, s, fmt.Errorf("curl %s: no status in %q", strings.Join(args, " "), s)
	}
	return code, s[:i], nil
}
