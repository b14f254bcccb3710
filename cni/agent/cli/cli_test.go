package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/etcdclient"
	"veclane.dev/cni/internal/testetcd"
)

func TestBadArgumentsAreRefusedWithTheirFlag(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		vtep, uplink string
		want         string
	}{
		{"", "eth0", "--vtep"},
		{"fd00::1", "eth0", "--vtep"},
		{"192.0.2.1", "", "no uplink"},
	} {
		etcd := etcdclient.Settings{Endpoints: []string{"http://127.0.0.1:1"}}
		err := run(context.Background(), log, etcd, agentFlags{node: "n1", vtep: c.vtep, uplink: c.uplink, ctl: "/nonexistent", ttl: time.Second, resync: time.Second})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("vtep %q uplink %q: %v, want %q", c.vtep, c.uplink, err, c.want)
		}
	}
	for _, c := range []struct {
		kf   kubeFlags
		want string
	}{
		{kubeFlags{kubeconfig: "/k", inCluster: true, defaultNet: "pods"}, "give one"},
		{kubeFlags{kubeconfig: "/k"}, "--default-network"},
		{kubeFlags{kubeconfig: "/nonexistent/kubeconfig", defaultNet: "pods"}, "kubernetes:"},
	} {
		etcd := etcdclient.Settings{Endpoints: []string{"http://127.0.0.1:1"}}
		err := run(context.Background(), log, etcd, agentFlags{node: "n1", vtep: "192.0.2.1", uplink: "eth0", ctl: "/nonexistent", ttl: time.Second, resync: time.Second, kube: c.kf})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.kf, err, c.want)
		}
	}
	p := pairs{}
	if err := p.Set("storage=eth1"); err != nil || p["storage"] != "eth1" {
		t.Fatalf("pairs: %v %v", p, err)
	}
	if err := p.Set("storage"); err == nil {
		t.Fatal("NAME without =INTERFACE accepted")
	}
}

func TestNetworkCommandWritesCheckedNetworks(t *testing.T) {
	etcd := testetcd.Start(t)
	var out bytes.Buffer
	ep := []string{"--etcd", etcd.Endpoint}
	must := func(args ...string) {
		t.Helper()
		out.Reset()
		if err := networkCmd(append(args, ep...), &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must("add", "blue", "--vni", "56", "--range", "10.1.0.0/16")
	must("add", "red", "--vni", "88", "--range", "10.1.0.0/16", "--physical-network", "storage")
	must("add", "pods", "--vni", "1", "--range", "10.244.0.0/16", "--pod-route", "0.0.0.0/0")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "green", "--vni", "56", "--range", "10.2.0.0/16"}, "56"},
		{[]string{"add", "green", "--vni", "57", "--range", "10.2.0.1/16"}, "10.2.0.1/16"},
		{[]string{"add", "green", "--vni", "0", "--range", "10.2.0.0/16"}, "vni"},
		{[]string{"add", "--vni", "9"}, "network name"},
		{[]string{"add", "green", "--vni", "58", "--range", "10.2.0.0/16", "--pod-route", "10.96.0.1/12"}, "10.96.0.1/12"},
		{[]string{"add", "green", "--vni", "58", "--range", "10.2.0.0/16", "--pod-route", "x"}, "pod-route"},
		{[]string{"frob", "x"}, "frob"},
	} {
		if err := networkCmd(append(c.args, ep...), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	must("list")
	if got := out.String(); !strings.Contains(got, "blue") || !strings.Contains(got, "storage") || !strings.Contains(got, "[0.0.0.0/0]") || strings.Contains(got, "green") {
		t.Fatalf("list:\n%s", got)
	}
	must("del", "blue")
	must("list")
	if strings.Contains(out.String(), "blue") {
		t.Fatalf("blue after del:\n%s", out.String())
	}
}

// The agent and its network command against an etcd that requires client certificates:
// with the TLS flags they write, read and register the node; without a certificate etcd
// refuses them; a missing file is named before anything is dialled.
func TestTheAgentSpeaksTLSWithAClientCertificate(t *testing.T) {
	etcd := testetcd.StartTLS(t)
	tlsFlags := []string{"--etcd", etcd.Endpoint, "--etcd-ca", etcd.Certs.CA, "--etcd-cert", etcd.Certs.ClientCert, "--etcd-key", etcd.Certs.ClientKey}
	var out bytes.Buffer
	if err := networkCmd(append([]string{"add", "blue", "--vni", "56", "--range", "10.1.0.0/16"}, tlsFlags...), &out); err != nil {
		t.Fatal(err)
	}
	if err := networkCmd(append([]string{"list"}, tlsFlags...), &out); err != nil || !strings.Contains(out.String(), "blue") {
		t.Fatalf("list: %v\n%s", err, out.String())
	}
	noCert := []string{"list", "--etcd", etcd.Endpoint, "--etcd-ca", etcd.Certs.CA}
	if err := networkCmd(noCert, io.Discard); err == nil {
		t.Fatal("etcd answered a client without a certificate")
	}
	missing := append([]string{"list"}, tlsFlags...)
	missing[len(missing)-1] = "/nonexistent/key.pem"
	if err := networkCmd(missing, io.Discard); err == nil || !strings.Contains(err.Error(), "/nonexistent/key.pem") {
		t.Fatalf("a missing key: %v", err)
	}

	// The agent itself registers its node through TLS (there is no daemon: it keeps trying
	// that), and stops when told.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		done <- run(ctx, log, etcd.Settings, agentFlags{node: "n1", vtep: "192.0.2.1", uplink: "uplink", ctl: "/nonexistent/ctl.sock", ttl: 5 * time.Second, resync: time.Second})
	}()
	c := etcd.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.Get(context.Background(), "/veclane/v1/nodes/n1")
		if err == nil && r.Count == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not register through TLS: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
