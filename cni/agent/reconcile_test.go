package agent

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/internal/testetcd"
)

const nodeConfig = `[daemon]
mode = "interrupt"
buffers = 4096

[[interface]]
name = "uplink"
socket = "uplink.sock"
id = 0
role = "master"
addresses = ["192.0.2.1/24"]

# The operator's own network (no owner): the agent never touches it.
[[network]]
name = "local"
vni = 7
ranges = ["10.50.0.0/16"]
`

// startDaemon runs `veclane run` in dir (its runtime directory) until the test ends, and
// connects to it.
func startDaemon(t *testing.T, dir string) (*testbin.Daemon, *Daemon) {
	t.Helper()
	p := testbin.StartDaemon(t, dir, nodeConfig)
	d, err := DialDaemon(p.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return p, d
}

func reconcile(t *testing.T, s *cluster.Store, d *Daemon) Round {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Reconcile(ctx, s, d, &Config{Node: cluster.Node{Name: "n1"}, Uplinks: Uplinks{"": "uplink"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) > 0 {
		t.Fatalf("refused: %v", r.Failed)
	}
	return r
}

// What node n1's daemon holds: its networks and, per tunnel, "network vni dst routes".
func held(t *testing.T, d *Daemon) (string, string) {
	t.Helper()
	nets, err := d.Networks()
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, n := range nets {
		ns = append(ns, fmt.Sprintf("%s/%d", n.Name, n.VNI))
	}
	tuns, err := d.Tunnels()
	if err != nil {
		t.Fatal(err)
	}
	var ts []string
	for _, x := range tuns {
		ts = append(ts, fmt.Sprintf("%s %d %s %d", x.Network, x.VNI, x.Dst, x.Routes))
	}
	sort.Strings(ns)
	sort.Strings(ts)
	return strings.Join(ns, ","), strings.Join(ts, ",")
}

// The agent of node n1 against a real daemon and a real etcd: it programs the networks and a
// route (hence a tunnel) per remote pod, converges, removes what goes away (a node whose
// lease expired, a deleted network), and rebuilds everything for a restarted daemon.
func TestAgentProgramsTheDaemonAndConverges(t *testing.T) {
	srv := testetcd.Start(t)
	s := cluster.NewStore(srv.Client(t))
	ctx := context.Background()
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	for _, n := range []cluster.Network{
		{Name: "blue", VNI: 56, Range: p("10.1.0.0/16")},
		{Name: "red", VNI: 88, Range: p("10.1.0.0/16")},
		// The name of the daemon's own network: reported, and left alone.
		{Name: "local", VNI: 70, Range: p("10.60.0.0/16")},
	} {
		if err := s.PutNetwork(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	self, err := s.Register(ctx, cluster.Node{Name: "n1", VTEP: a("192.0.2.1")}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Abandon()
	n2, err := s.Register(ctx, cluster.Node{Name: "n2", VTEP: a("192.0.2.2")}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []cluster.PodAttachment{
		{Network: "blue", ContainerID: "c1", IfName: "net1", Node: "n1", Address: a("10.1.0.2")},
		{Network: "blue", ContainerID: "c2", IfName: "net1", Node: "n2", Address: a("10.1.0.3")},
		{Network: "blue", ContainerID: "c4", IfName: "net1", Node: "n2", Address: a("10.1.0.4")},
		{Network: "red", ContainerID: "c3", IfName: "net1", Node: "n2", Address: a("10.1.0.2")},
	} {
		if err := s.PutAttachment(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	cmd, d := startDaemon(t, dir)

	r := reconcile(t, s, d)
	if len(r.Applied) != 5 {
		t.Fatalf("first round applied %v", r.Applied)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "network local: the daemon has a network of that name the agent did not create") {
		t.Fatalf("problems: %v", r.Problems)
	}
	nets, tuns := held(t, d)
	if nets != "blue/56,local/7,red/88" || tuns != "blue 56 192.0.2.2 2,red 88 192.0.2.2 1" {
		t.Fatalf("held networks %q, tunnels %q", nets, tuns)
	}
	if r := reconcile(t, s, d); len(r.Applied) != 0 {
		t.Fatalf("a converged node applied %v", r.Applied)
	}

	// n2 crashes: when its lease expires its routes and tunnels go.
	n2.Abandon()
	deadline := time.Now().Add(10 * time.Second)
	for {
		reconcile(t, s, d)
		if _, tuns := held(t, d); tuns == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n2's tunnels outlived its lease by 8 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// red is deleted from the cluster: from the daemon too.
	if err := s.DeleteNetwork(ctx, "red"); err != nil {
		t.Fatal(err)
	}
	reconcile(t, s, d)
	if nets, _ := held(t, d); nets != "blue/56,local/7" {
		t.Fatalf("after red was deleted: %q", nets)
	}
	// etcd forgets local too: the daemon's own network stays.
	if err := s.DeleteNetwork(ctx, "local"); err != nil {
		t.Fatal(err)
	}
	reconcile(t, s, d)
	if nets, _ := held(t, d); nets != "blue/56,local/7" {
		t.Fatalf("the daemon's own network was touched: %q", nets)
	}

	// n2 comes back, and n1's daemon restarts with nothing: one round rebuilds it all.
	if _, err := s.Register(ctx, cluster.Node{Name: "n2", VTEP: a("192.0.2.2")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	cmd.Kill()
	_, d = startDaemon(t, dir)
	if nets, _ := held(t, d); nets != "local/7" {
		t.Fatalf("a fresh daemon holds %q", nets)
	}
	reconcile(t, s, d)
	nets, tuns = held(t, d)
	if nets != "blue/56,local/7" || tuns != "blue 56 192.0.2.2 2" {
		t.Fatalf("after the daemon's restart: networks %q, tunnels %q", nets, tuns)
	}
}
