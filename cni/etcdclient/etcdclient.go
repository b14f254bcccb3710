// Package etcdclient is how every veclane program reaches etcd: the endpoints and, for an
// etcd that checks client certificates (`--client-cert-auth`), the CA that signed etcd's
// certificate and the client's own certificate and key. The node agent takes them as flags
// (AddFlags), the CNI and IPAM plugins from their network configuration (Settings' JSON
// keys); all of them build their client here and nowhere else.
package etcdclient

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrSettings is what every error of Config wraps: a mistake in the settings (a plugin's
// configuration, the agent's flags), not etcd's answer.
var ErrSettings = errors.New("etcd settings")

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: %w", ErrSettings, fmt.Errorf(format, a...))
}

// DialTimeout bounds connecting to etcd.
const DialTimeout = 5 * time.Second

// Settings is where etcd is and how to prove who we are to it.
type Settings struct {
	// Endpoints are etcd's client URLs: all http://, or all https:// (with TLS).
	Endpoints []string `json:"etcd_endpoints"`
	// CAFile (PEM) verifies etcd's certificate; without it, the system's roots do.
	CAFile string `json:"etcd_ca_file,omitempty"`
	// CertFile and KeyFile (PEM) are the client's certificate and key, for an etcd that
	// requires client certificates. Both or neither.
	CertFile string `json:"etcd_cert_file,omitempty"`
	KeyFile  string `json:"etcd_key_file,omitempty"`
}

// TLS says whether any TLS setting is given.
func (s Settings) TLS() bool { return s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" }

// AddFlags defines the agent's flags for s: --etcd (comma-separated endpoints, default
// http://127.0.0.1:2379), --etcd-ca, --etcd-cert and --etcd-key.
func (s *Settings) AddFlags(fs *flag.FlagSet) {
	s.Endpoints = []string{"http://127.0.0.1:2379"}
	fs.Var((*endpoints)(&s.Endpoints), "etcd", "etcd endpoints, comma-separated (https:// with the TLS flags)")
	fs.StringVar(&s.CAFile, "etcd-ca", "", "CA certificate (PEM) that signed etcd's certificate (default: the system's roots)")
	fs.StringVar(&s.CertFile, "etcd-cert", "", "client certificate (PEM), for an etcd run with --client-cert-auth")
	fs.StringVar(&s.KeyFile, "etcd-key", "", "the client certificate's key (PEM)")
}

type endpoints []string

func (e *endpoints) String() string { return strings.Join(*e, ",") }
func (e *endpoints) Set(v string) error {
	*e = strings.Split(v, ",")
	return nil
}

// Config is the etcd client's configuration for s. Every mistake (no endpoint, a mix of
// http:// and https://, TLS settings for http://, a certificate without its key, a file that
// is missing or holds no certificate or key) is an error naming the setting and the file.
func (s Settings) Config() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: s.Endpoints, DialTimeout: DialTimeout}
	if len(s.Endpoints) == 0 {
		return cfg, bad("no endpoint (etcd_endpoints, --etcd)")
	}
	secure := 0
	for _, e := range s.Endpoints {
		if strings.HasPrefix(e, "https://") {
			secure++
		} else if !strings.HasPrefix(e, "http://") {
			return cfg, bad("endpoint %q: expected http:// or https://", e)
		}
	}
	switch {
	case secure != 0 && secure != len(s.Endpoints):
		return cfg, bad("endpoints %s mix http:// and https://", strings.Join(s.Endpoints, ","))
	case secure == 0 && s.TLS():
		return cfg, bad("TLS settings (CA, certificate, key) are given but endpoints %s are http://: use https://", strings.Join(s.Endpoints, ","))
	case secure == 0:
		return cfg, nil
	}
	t, err := s.tlsConfig()
	if err != nil {
		return cfg, err
	}
	cfg.TLS = t
	return cfg, nil
}

func (s Settings) tlsConfig() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, bad("CA (etcd_ca_file, --etcd-ca): %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, bad("CA (etcd_ca_file, --etcd-ca) %s holds no PEM certificate", s.CAFile)
		}
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return nil, bad("client certificate and key (etcd_cert_file and etcd_key_file, --etcd-cert and --etcd-key) go together: got certificate %q, key %q", s.CertFile, s.KeyFile)
	}
	if s.CertFile != "" {
		c, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, bad("client certificate %s and key %s (etcd_cert_file, etcd_key_file, --etcd-cert, --etcd-key): %w", s.CertFile, s.KeyFile, err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}

// Client connects to etcd as s says (Config); the caller closes it.
func (s Settings) Client() (*clientv3.Client, error) {
	cfg, err := s.Config()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(s.Endpoints, ","), err)
	}
	return c, nil
}

// CNIClient is Client for a CNI plugin: its error a CNI error, a mistake in the settings (a
// TLS file missing, say) the configuration's (code 7), anything else "try again later" (11).
func (s Settings) CNIClient() (*clientv3.Client, error) {
	c, err := s.Client()
	if errors.Is(err, ErrSettings) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	return c, nil
}
