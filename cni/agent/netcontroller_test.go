package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gopkg.in/yaml.v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testetcd"
	"veclane.dev/cni/internal/testkube"
)

func TestNetworkFromSpec(t *testing.T) {
	p := netip.MustParsePrefix
	n, err := NetworkFromSpec("pods", map[string]any{"vni": int64(1), "range": "10.244.0.0/16", "podRoutes": []any{"0.0.0.0/0"}})
	if err != nil || n.VNI != 1 || n.Range != p("10.244.0.0/16") || len(n.PodRoutes) != 1 || n.Origin != cluster.OriginKubernetes {
		t.Fatalf("%+v %v", n, err)
	}
	for _, c := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"x", map[string]any{"range": "10.0.0.0/8"}, "spec.vni"},
		{"x", map[string]any{"vni": int64(1 << 24), "range": "10.0.0.0/8"}, "16777216"},
		{"x", map[string]any{"vni": 2.5, "range": "10.0.0.0/8"}, "2.5"},
		{"x", map[string]any{"vni": int64(2), "range": "10.0.0.1/8"}, "host bits"},
		{"x", map[string]any{"vni": int64(2), "range": "nope"}, "spec.range"},
		{"x", map[string]any{"vni": int64(2), "range": "10.0.0.0/8", "podRoutes": "0.0.0.0/0"}, "not a list"},
		{"x", map[string]any{"vni": int64(2), "range": "10.0.0.0/8", "podRoutes": []any{"10.1.2.3/8"}}, "pod route"},
		{"x", map[string]any{"vni": int64(2), "range": "10.0.0.0/8", "physicalNetworkName": 3}, "physicalNetworkName"},
		{strings.Repeat("n", 32), map[string]any{"vni": int64(2), "range": "10.0.0.0/8"}, "1 to 31"},
	} {
		if _, err := NetworkFromSpec(c.name, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// lead campaigns as node and waits until it leads; its guard.
func lead(t *testing.T, ctx context.Context, s *cluster.Store, node string) clientv3Guard {
	t.Helper()
	l := s.Campaign(ctx, "network-controller", node, 2*time.Second, quiet())
	var g clientv3Guard
	eventually(t, node+" leads", 10*time.Second, func() bool { var ok bool; g, ok = l.Guard(); return ok })
	return g
}

// The controller under its lead: resources become etcd networks (an operator's network of
// the same name, an unusable resource and a VNI taken twice are reported and change
// nothing), a resource gone takes its network with it, and a leader that lost the lead
// writes nothing.
func TestNetworkControllerCopiesResourcesUnderItsLead(t *testing.T) {
	srv := testetcd.Start(t)
	s := cluster.NewStore(srv.Client(t))
	ctx := context.Background()
	p := netip.MustParsePrefix
	if err := s.PutNetwork(ctx, cluster.Network{Name: "green", VNI: 9, Range: p("10.9.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	res := func(name string, vni uint32, r string) NetworkResource {
		return NetworkResource{Name: name, Network: cluster.Network{Name: name, VNI: vni, Range: p(r), Origin: cluster.OriginKubernetes}}
	}
	ctx1, stop1 := context.WithCancel(ctx)
	g1 := lead(t, ctx1, s, "n1")
	all := []NetworkResource{
		res("blue", 2, "10.1.0.0/16"), res("green", 3, "10.3.0.0/16"), res("twin", 2, "10.4.0.0/16"),
		{Name: "bad", Err: errors.New("spec.vni is missing")},
	}
	done, problems, err := syncNetworks(ctx, s, all, g1)
	if err != nil || len(done) != 1 || !strings.Contains(done[0], "network blue") {
		t.Fatalf("done %v, err %v", done, err)
	}
	for _, want := range []string{"green: an operator's network", "twin: network twin: vni 2 is network blue's", "bad: spec.vni is missing"} {
		if !strings.Contains(strings.Join(problems, "\n"), want) {
			t.Errorf("want %q in %v", want, problems)
		}
	}
	nets := func() string {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range snap.Networks {
			out = append(out, n.Name+"/"+n.Origin)
		}
		return strings.Join(out, ",")
	}
	if got := nets(); got != "blue/kubernetes,green/" {
		t.Fatalf("etcd holds %s", got)
	}
	// Converged: nothing to do. Then blue's resource goes: blue goes, green stays.
	if done, _, _ := syncNetworks(ctx, s, all, g1); len(done) != 0 {
		t.Fatalf("again: %v", done)
	}
	if done, _, err := syncNetworks(ctx, s, nil, g1); err != nil || len(done) != 1 {
		t.Fatalf("%v %v", done, err)
	}
	if got := nets(); got != "green/" {
		t.Fatalf("etcd holds %s", got)
	}
	// n1 stops leading; n2 takes over; n1's writes are refused.
	stop1()
	ctx2, stop2 := context.WithCancel(ctx)
	t.Cleanup(stop2)
	g2 := lead(t, ctx2, s, "n2")
	if _, _, err := syncNetworks(ctx, s, all[:1], g1); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("a former leader's write: %v", err)
	}
	if got := nets(); got != "green/" {
		t.Fatalf("etcd holds %s after a former leader's write", got)
	}
	if _, _, err := syncNetworks(ctx, s, all[:1], g2); err != nil || nets() != "blue/kubernetes,green/" {
		t.Fatalf("the new leader: %v, %s", err, nets())
	}
}

// applyYAML creates every document of a file of docs/k8s on the API server.
func applyYAML(t *testing.T, dc dynamic.Interface, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../docs/k8s", file))
	if err != nil {
		t.Fatal(err)
	}
	d := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := createObject(dc, m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

// createObject creates a cluster-scoped object, retrying while its CRD is being established.
func createObject(dc dynamic.Interface, m map[string]any) error {
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	gvr := crdResource
	if gvk.Kind == "Network" {
		gvr = networkResource
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := dc.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) || !strings.Contains(err.Error(), "the server could not find the requested resource") {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The whole path on a real API server, with docs/k8s's CRD: the API server refuses what its
// schema refuses, a Network resource becomes the daemon's network through the agent (its
// controller, etcd, its rounds), and deleting the resource deletes the network.
func TestNetworkResourcesReachTheDaemon(t *testing.T) {
	api := testkube.Start(t)
	dc := dynamic.NewForConfigOrDie(api.Config)
	applyYAML(t, dc, "network-crd.yaml")
	network := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "veclane.dev/v1alpha1", "kind": "Network", "metadata": map[string]any{"name": name}, "spec": spec}
	}
	for name, spec := range map[string]map[string]any{
		"vni-zero":              {"vni": 0, "range": "10.5.0.0/16"},
		"host-bits":             {"vni": 5, "range": "10.5.0.1/16"},
		"v6":                    {"vni": 5, "range": "fd00::/64"},
		"bad-route":             {"vni": 5, "range": "10.5.0.0/16", "podRoutes": []any{"10.0.0.1/8"}},
		strings.Repeat("n", 32): {"vni": 5, "range": "10.5.0.0/16"},
	} {
		if err := createObject(dc, network(name, spec)); err == nil || !strings.Contains(err.Error(), "Invalid") {
			t.Errorf("%s: the API server took it: %v", name, err)
		}
	}
	applyYAML(t, dc, "blue-network.yaml")

	srv := testetcd.Start(t)
	s := cluster.NewStore(srv.Client(t))
	dir := t.TempDir()
	_, d := startDaemon(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kw, err := WatchKube(ctx, api.Config, quiet())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, s, Config{
			Node: cluster.Node{Name: "n1", VTEP: netip.MustParseAddr("192.0.2.1")}, Uplinks: Uplinks{"": "uplink"},
			CtlSocket: filepath.Join(dir, "ctl.sock"), LeaseTTL: 2 * time.Second, Resync: time.Minute,
			MaxBackoff: 200 * time.Millisecond, Log: quiet(), Kube: kw, DefaultNetwork: "local",
		})
	}()
	eventually(t, "blue from its resource", 20*time.Second, func() bool { n, _ := held(t, d); return n == "blue/2,local/7" })
	if err := dc.Resource(networkResource).Delete(ctx, "blue", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "blue deleted with its resource", 20*time.Second, func() bool { n, _ := held(t, d); return n == "local/7" })
	cancel()
	<-done
}

type clientv3Guard = clientv3.Cmp

// A Network resource's spec is whatever the API server let through: no spec crashes the
// reader, and every network it accepts is one etcd's readers accept too.
func FuzzNetworkFromSpec(f *testing.F) {
	for _, seed := range []string{
		`{"vni":1,"range":"10.244.0.0/16","podRoutes":["0.0.0.0/0"]}`,
		`{"vni":2,"range":"10.1.0.0/16","physicalNetworkName":"storage"}`,
		`{"vni":16777216,"range":"10.0.0.0/8"}`, `{"vni":-1}`, `{"vni":2.5,"range":"x"}`,
		`{"vni":3,"range":"10.0.0.0/8","podRoutes":[1,null,"10.1.2.3/8"]}`, `{}`, `null`,
	} {
		f.Add("net", seed)
	}
	f.Fuzz(func(t *testing.T, name, spec string) {
		var m map[string]any
		if json.Unmarshal([]byte(spec), &m) != nil {
			return
		}
		n, err := NetworkFromSpec(name, m)
		if err != nil {
			return
		}
		if verr := n.Validate(); verr != nil || n.Name != name || n.Origin != cluster.OriginKubernetes {
			t.Fatalf("%q %s: accepted %+v (%v)", name, spec, n, verr)
		}
	})
}
