package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/internal/testetcd"
	"veclane.dev/cni/pod"
)

// The node link made by real agent rounds into a real daemon, in a namespace standing for
// the host: the node pings a pod of the network through it, the next round makes nothing,
// and after the daemon restarts (the tap and its host side gone with it) the next round makes
// the link and the pod's interface again, and the ping goes through again.
func TestNodeLinkReachesPodsAndComesBackAfterARestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root for network namespaces")
	}
	srv := testetcd.Start(t)
	s := cluster.NewStore(srv.Client(t))
	ctx := context.Background()
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	all := []netip.Prefix{p("0.0.0.0/0")}
	if err := s.PutNetwork(ctx, cluster.Network{Name: "pods", VNI: 1, Range: p("10.244.0.0/16"), PodRoutes: all}); err != nil {
		t.Fatal(err)
	}
	node := cluster.Node{Name: "n1", VTEP: a("192.0.2.1")}
	if _, err := s.Register(ctx, node, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	host, podNS := testbin.Netns(t, "vlnh"), testbin.Netns(t, "vlnp")
	// The node's own address, on its loopback: what the link routes to the node.
	testbin.Run(t, "ip", "-n", host, "link", "set", "lo", "up")
	testbin.Run(t, "ip", "-n", host, "addr", "add", "192.0.2.1/32", "dev", "lo")
	hostMAC, ourMAC := pod.MACs("c1", "eth0")
	att := cluster.PodAttachment{Network: "pods", ContainerID: "c1", IfName: "eth0", Node: "n1", Address: a("10.244.0.5"),
		Interface: &cluster.PodInterface{Kind: "tap", Netns: "/var/run/netns/" + podNS, Name: pod.DaemonName("c1", "eth0"),
			MAC: ourMAC.String(), HostMAC: hostMAC.String(), Gateway: pod.Gateway, Routes: all}}
	if err := s.PutAttachment(ctx, att); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Node: node, Uplinks: Uplinks{"": ""}, NodeLink: "pods", NodeLinkNetns: "/var/run/netns/" + host}
	dir := t.TempDir()
	round := func(d *Daemon) []string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := Reconcile(rctx, s, d, cfg)
		if err != nil || len(r.Failed) > 0 {
			t.Fatalf("round: %v; refused %v; problems %v", err, r.Failed, r.Problems)
		}
		var kinds []string
		for _, x := range r.Applied {
			kinds = append(kinds, x.Kind)
		}
		return kinds
	}
	for restart := 0; restart < 2; restart++ {
		proc := testbin.StartDaemon(t, dir, "[daemon]\nmode = \"interrupt\"\n", "ip", "netns", "exec", host)
		d, err := DialDaemon(proc.Socket())
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(round(d)); got != "[network-add node-link pod-add]" {
			t.Fatalf("restart %d: applied %s", restart, got)
		}
		if out := testbin.Run(t, "ip", "-n", host, "-4", "route", "show", "10.244.0.0/16"); !strings.Contains(out, "via 169.254.1.1 dev "+NodeLinkIfName) {
			t.Fatalf("the host's route to the network: %q", out)
		}
		testbin.Run(t, "ip", "netns", "exec", host, "ping", "-c", "1", "-W", "5", "10.244.0.5")
		// The pod reaches the node's address too (the pod's default route, through veclane).
		testbin.Run(t, "ip", "netns", "exec", podNS, "ping", "-c", "1", "-W", "5", "192.0.2.1")
		if got := round(d); len(got) != 0 {
			t.Fatalf("restart %d: converged, yet the next round applied %v", restart, got)
		}
		_ = d.Close()
		proc.Kill()
	}
}
