package etcdclient_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/etcdclient"
	"veclane.dev/cni/internal/testetcd"
)

// get reads a key with settings s; the error of the first step that fails.
func get(s etcdclient.Settings) error {
	c, err := s.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = c.Get(ctx, "/veclane/v1/")
	return err
}

// An etcd that requires client certificates: the client with the CA's certificate reads and
// writes; one without a certificate, with another CA's certificate, or speaking http to it
// is refused by etcd.
func TestEtcdWithClientCertificates(t *testing.T) {
	srv := testetcd.StartTLS(t)
	good := srv.Settings
	if err := get(good); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	noCert := good
	noCert.CertFile, noCert.KeyFile = "", ""
	stranger := good
	stranger.CertFile, stranger.KeyFile = srv.Certs.StrangerCert, srv.Certs.StrangerKey
	plain := etcdclient.Settings{Endpoints: []string{strings.Replace(srv.Endpoint, "https://", "http://", 1)}}
	// The client does not take a server whose certificate its CA did not sign either.
	wrongCA := good
	wrongCA.CAFile = srv.Certs.StrangerCert
	t.Run("refused", func(t *testing.T) {
		for name, s := range map[string]etcdclient.Settings{
			"no certificate": noCert, "another CA's certificate": stranger, "http": plain, "another CA trusted": wrongCA,
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				err := get(s)
				if err == nil {
					t.Fatal("etcd answered")
				}
				if errors.Is(err, etcdclient.ErrSettings) {
					t.Fatalf("refused by the settings, not by etcd: %v", err)
				}
			})
		}
	})
}

// Settings that cannot work are refused before anything is dialled, naming the setting and
// the file.
func TestBadSettingsAreRefusedWithTheirName(t *testing.T) {
	srv := testetcd.StartTLS(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := srv.Settings
	with := func(f func(*etcdclient.Settings)) etcdclient.Settings {
		s := good
		f(&s)
		return s
	}
	for _, c := range []struct {
		name string
		s    etcdclient.Settings
		want string
	}{
		{"missing CA", with(func(s *etcdclient.Settings) { s.CAFile = "/nonexistent/ca.pem" }), "CA (etcd_ca_file, --etcd-ca): open /nonexistent/ca.pem: no such file"},
		{"CA not PEM", with(func(s *etcdclient.Settings) { s.CAFile = notPEM }), notPEM + " holds no PEM certificate"},
		{"missing certificate", with(func(s *etcdclient.Settings) { s.CertFile = "/nonexistent/client.pem" }), "/nonexistent/client.pem"},
		{"key of another certificate", with(func(s *etcdclient.Settings) { s.KeyFile = srv.Certs.StrangerKey }), "private key does not match public key"},
		{"certificate without key", with(func(s *etcdclient.Settings) { s.KeyFile = "" }), "go together"},
		{"TLS over http", with(func(s *etcdclient.Settings) { s.Endpoints = []string{"http://127.0.0.1:2379"} }), "use https://"},
		{"mixed schemes", with(func(s *etcdclient.Settings) { s.Endpoints = append(s.Endpoints, "http://127.0.0.1:2379") }), "mix http:// and https://"},
		{"no endpoint", etcdclient.Settings{}, "no endpoint"},
		{"no scheme", etcdclient.Settings{Endpoints: []string{"127.0.0.1:2379"}}, "expected http:// or https://"},
	} {
		err := get(c.s)
		if !errors.Is(err, etcdclient.ErrSettings) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
