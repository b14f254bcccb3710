// Package testkube starts a real Kubernetes API server for tests: kube-apiserver as
// scripts/build-k8s.sh builds it, on an etcd of its own (package testetcd), on loopback,
// with an admin token. No controller manager, scheduler or kubelet: objects are what the
// test writes (as controller tests against envtest do).
package testkube

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"veclane.dev/cni/internal/testetcd"
)

// Server is a running API server.
type Server struct {
	// Config reaches it as cluster admin.
	Config *rest.Config
	log    *strings.Builder
}

// Binary finds kube-apiserver: $VECLANE_K8S_BIN/kube-apiserver, else the newest build in
// scripts/build-k8s.sh's cache (${XDG_CACHE_HOME:-~/.cache}/veclane/k8s-*/bin).
func Binary() (string, error) {
	if d := os.Getenv("VECLANE_K8S_BIN"); d != "" {
		return filepath.Join(d, "kube-apiserver"), nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache")
	}
	dirs, _ := filepath.Glob(filepath.Join(cache, "veclane", "k8s-v*", "bin", "kube-apiserver"))
	sort.Strings(dirs)
	if len(dirs) == 0 {
		return "", fmt.Errorf("no kube-apiserver in %s/veclane/k8s-*/bin: build it with scripts/build-k8s.sh (or set VECLANE_K8S_BIN)", cache)
	}
	return dirs[len(dirs)-1], nil
}

// Start runs kube-apiserver for the life of t and waits until it serves. It fails the test
// when the binary is missing (make test builds it; a skipped test would prove nothing).
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	etcd := testetcd.Start(t)
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saKey := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	saPub := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	token := fmt.Sprintf("%x", key.D.Bytes()[:16])
	tokens := write("tokens.csv", []byte(token+",admin,admin,system:masters\n"))
	port := freePort(t)
	s := &Server{log: &strings.Builder{}}
	cmd := exec.Command(bin,
		"--etcd-servers", etcd.Endpoint,
		"--etcd-prefix", "/registry",
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey,
		"--disable-admission-plugins", "ServiceAccount",
	)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	s.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", port),
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
	}
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		cancel()
		if err == nil {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("kube-apiserver exited: %v\n%s", cmd.ProcessState, tail(s.log.String()))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver did not serve within 60 s: %v\n%s", err, tail(s.log.String()))
		}
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
