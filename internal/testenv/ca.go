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

	t      testing.TB // nil for a fixture's CA (StartCA)
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// Issued is a certificate the CA issued and its key, as PEM files.
type Issued struct {
	CertFile, KeyFile string
	// PKCS8KeyFile is the same key in PKCS #8 ("PRIVATE KEY"), the only
	// form a Java PEM keystore (Kafka's ssl.keystore.type=PEM) reads.
	PKCS8KeyFile string
	Cert         *x509.Certificate
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
	ca, err := StartCA(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	ca.t = t
	return ca
}

// StartCA is NewCA for a fixture that outlives a test, its files under dir.
func StartCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{dir: dir, cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.serial.Store(1)
	ca.Pool.AddCert(cert)
	if ca.File, err = ca.write("ca.pem", "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(cn string) Issued {
	return ca.must(ca.Issue(cn, x509.ExtKeyUsageServerAuth))
}

// Client issues a client certificate.
func (ca *CA) Client(cn string) Issued {
	return ca.must(ca.Issue(cn, x509.ExtKeyUsageClientAuth))
}

func (ca *CA) must(i Issued, err error) Issued {
	if err != nil {
		if ca.t == nil {
			panic(err)
		}
		ca.t.Helper()
		ca.t.Fatal(err)
	}
	return i
}

// Issue issues a certificate for usage (a server's: for 127.0.0.1, ::1 and
// localhost).
func (ca *CA) Issue(cn string, usage x509.ExtKeyUsage) (Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
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
		return Issued{}, err
	}
	out := Issued{}
	if out.Cert, err = x509.ParseCertificate(der); err != nil {
		return Issued{}, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	name := cn + "-" + big.NewInt(serial).String()
	for _, f := range []struct {
		to        *string
		name, typ string
		der       []byte
	}{{&out.CertFile, name + ".crt", "CERTIFICATE", der}, {&out.KeyFile, name + ".key", "EC PRIVATE KEY", kder},
		{&out.PKCS8KeyFile, name + ".p8.key", "PRIVATE KEY", p8}} {
		if *f.to, err = ca.write(f.name, f.typ, f.der); err != nil {
			return Issued{}, err
		}
	}
	if out.Pair, err = tls.LoadX509KeyPair(out.CertFile, out.KeyFile); err != nil {
		return Issued{}, err
	}
	return out, nil
}

func (ca *CA) write(name, typ string, der []byte) (string, error) {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
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
