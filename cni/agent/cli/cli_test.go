package cli

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

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
		err := run(log, "http://127.0.0.1:1", "n1", c.vtep, c.uplink, "/nonexistent", time.Second, time.Second, pairs{}, kubeFlags{})
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
		err := run(log, "http://127.0.0.1:1", "n1", "192.0.2.1", "eth0", "/nonexistent", time.Second, time.Second, pairs{}, c.kf)
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
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "green", "--vni", "56", "--range", "10.2.0.0/16"}, "56"},
		{[]string{"add", "green", "--vni", "57", "--range", "10.2.0.1/16"}, "10.2.0.1/16"},
		{[]string{"add", "green", "--vni", "0", "--range", "10.2.0.0/16"}, "vni"},
		{[]string{"add", "--vni", "9"}, "network name"},
		{[]string{"frob", "x"}, "frob"},
	} {
		if err := networkCmd(append(c.args, ep...), io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	must("list")
	if got := out.String(); !strings.Contains(got, "blue") || !strings.Contains(got, "storage") || strings.Contains(got, "green") {
		t.Fatalf("list:\n%s", got)
	}
	must("del", "blue")
	must("list")
	if strings.Contains(out.String(), "blue") {
		t.Fatalf("blue after del:\n%s", out.String())
	}
}
