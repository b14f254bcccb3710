// Package testetcd starts a real etcd server (Debian's etcd-server) for tests: one process per
// test, on loopback ports nobody else holds, with a data directory that goes with the test;
// plain, or with TLS and client certificates.
package testetcd

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/etcdclient"
)

// Server is a running etcd.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT (https:// with TLS).
	Endpoint string
	// Settings reach it: its endpoint and, with TLS, the CA and the good client certificate.
	Settings etcdclient.Settings
	// Certs are its PKI's files (StartTLS only).
	Certs Certs
	cmd   *exec.Cmd
	log   *strings.Builder
}

// Start runs etcd for the life of t and waits until it answers. It fails the test when the
// binary is missing: scripts/setup.sh installs it, and a test that skipped would prove nothing.
func Start(t testing.TB) *Server { return start(t, false) }

// StartTLS runs etcd as a secured cluster's is (docs/cluster.md): client URLs on https with
// a certificate of a CA made for the test, and client certificates of that CA required
// (--client-cert-auth).
func StartTLS(t testing.TB) *Server { return start(t, true) }

func start(t testing.TB, secure bool) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd not found on PATH (scripts/setup.sh installs Debian's etcd-server): %v", err)
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	scheme := "http"
	if secure {
		scheme = "https"
	}
	s := &Server{Endpoint: fmt.Sprintf("%s://127.0.0.1:%d", scheme, client), log: &strings.Builder{}}
	s.Settings.Endpoints = []string{s.Endpoint}
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	args := []string{
		"--name", "test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", s.Endpoint,
		"--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test=" + peerURL,
		"--log-level", "warn",
	}
	if secure {
		s.Certs = makeCerts(t, dir)
		args = append(args, "--client-cert-auth", "--trusted-ca-file", s.Certs.CA,
			"--cert-file", s.Certs.ServerCert, "--key-file", s.Certs.ServerKey)
		s.Settings.CAFile, s.Settings.CertFile, s.Settings.KeyFile = s.Certs.CA, s.Certs.ClientCert, s.Certs.ClientKey
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(s.Stop)
	s.waitReady(t)
	return s
}

// Restart starts the server again after Stop, on the same ports and data (an etcd that was
// killed and came back), and waits until it answers.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.cmd = exec.Command(s.cmd.Path, s.cmd.Args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("restarting etcd: %v", err)
	}
	s.waitReady(t)
}

func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	c := s.Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not answer within 20 s: %v\n%s", err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Client returns a client of the server (with its Settings), closed with the test.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.Settings.Client()
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server with SIGKILL (idempotent).
func (s *Server) Stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
