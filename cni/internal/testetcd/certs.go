package testetcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Certs are the files of a TLS etcd's test PKI, all PEM: a CA, etcd's certificate (for
// 127.0.0.1) signed by it, a client certificate signed by it, and a client certificate
// signed by another CA (one etcd must refuse).
type Certs struct {
	CA                        string
	ServerCert, ServerKey     string
	ClientCert, ClientKey     string
	StrangerCert, StrangerKey string
}

type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// makeCerts writes a test PKI into dir.
func makeCerts(t testing.TB, dir string) Certs {
	t.Helper()
	c := Certs{CA: filepath.Join(dir, "ca.pem")}
	ca := newCA(t, "veclane test CA")
	writePEM(t, c.CA, "CERTIFICATE", ca.cert.Raw)
	c.ServerCert, c.ServerKey = leaf(t, dir, "server", ca, x509.ExtKeyUsageServerAuth)
	c.ClientCert, c.ClientKey = leaf(t, dir, "client", ca, x509.ExtKeyUsageClientAuth)
	c.StrangerCert, c.StrangerKey = leaf(t, dir, "stranger", newCA(t, "another CA"), x509.ExtKeyUsageClientAuth)
	return c
}

func newCA(t testing.TB, name string) issuer {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return issuer{cert, key}
}

// leaf writes a certificate for name signed by ca (valid for 127.0.0.1, as client and for
// `usage`) and its key; their paths. etcd's own certificate is also a client one: its
// gateway dials etcd with it.
func leaf(t testing.TB, dir, name string, ca issuer, usage x509.ExtKeyUsage) (string, string) {
	t.Helper()
	key := newKey(t)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", k)
	return cert, keyFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
