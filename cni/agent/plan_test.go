package agent

import (
	"net/netip"
	"strings"
	"testing"

	"veclane.dev/cni/cluster"
)

func snap() *cluster.Snapshot {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	return &cluster.Snapshot{
		Networks: []cluster.Network{
			{Name: "blue", VNI: 56, Range: p("10.1.0.0/16")},
			{Name: "red", VNI: 88, Range: p("10.1.0.0/16")},
			{Name: "green", VNI: 99, Range: p("10.7.0.0/16"), PhysicalNetwork: "storage"},
		},
		Nodes: []cluster.Node{{Name: "n1", VTEP: a("192.168.0.1")}, {Name: "n2", VTEP: a("192.168.0.2")}},
		Attachments: []cluster.PodAttachment{
			{Network: "blue", ContainerID: "c1", IfName: "net1", Node: "n1", Address: a("10.1.0.2")},
			{Network: "blue", ContainerID: "c2", IfName: "net1", Node: "n2", Address: a("10.1.0.3")},
			{Network: "red", ContainerID: "c3", IfName: "net1", Node: "n2", Address: a("10.1.0.2")},
			// n3 is not registered (its lease expired): no route to its pods.
			{Network: "blue", ContainerID: "c4", IfName: "net1", Node: "n3", Address: a("10.1.0.4")},
		},
	}
}

func TestDesiredRoutesEveryRemotePodOfARegisteredNode(t *testing.T) {
	st, problems := Desired(snap(), "n1", Uplinks{"": "eth0"})
	if len(st.Networks) != 2 || st.Networks["blue"].Uplink != "eth0" {
		t.Fatalf("networks: %v", st.Networks)
	}
	var routes []string
	for r := range st.Routes {
		routes = append(routes, r.String())
	}
	want := map[string]bool{
		"10.1.0.3/32 via 192.168.0.2 network blue": true,
		"10.1.0.2/32 via 192.168.0.2 network red":  true,
	}
	if len(routes) != len(want) {
		t.Fatalf("routes %v", routes)
	}
	for _, r := range routes {
		if !want[r] {
			t.Fatalf("unexpected route %s in %v", r, routes)
		}
	}
	all := strings.Join(problems, "\n")
	if !strings.Contains(all, `physical network "storage" has no uplink on node n1`) {
		t.Fatalf("problems: %v", problems)
	}
}

// A node without an uplink holds the networks, and routes no pod of another node.
func TestDesiredWithoutUplink(t *testing.T) {
	st, problems := Desired(snap(), "n1", Uplinks{"": ""})
	if len(st.Networks) != 2 || st.Networks["blue"].Uplink != "" || len(st.Routes) != 0 {
		t.Fatalf("networks %v routes %v", st.Networks, st.Routes)
	}
	if all := strings.Join(problems, "\n"); !strings.Contains(all, "pod 10.1.0.3 on node n2 is not reachable from node n1: the network has no uplink here") {
		t.Fatalf("problems: %v", problems)
	}
}

// Plan against what the daemon holds: deletes before adds, a changed network replaced, the
// daemon's foreign networks left alone, a local address never routed away, nothing to do
// when converged. want is always node n1's Desired state of snap().
func TestPlan(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	want, _ := Desired(snap(), "n1", Uplinks{"": "eth0"})
	for _, c := range []struct {
		name string
		have State
		plan []string
	}{
		{
			name: "deletes before adds; a changed network replaced",
			have: State{
				Networks: map[string]*NetworkState{
					// blue as wanted; red with another VNI (replaced); old is gone from etcd.
					"blue": {Name: "blue", VNI: 56, Ranges: []netip.Prefix{p("10.1.0.0/16")}, Uplink: "eth0"},
					"red":  {Name: "red", VNI: 77, Ranges: []netip.Prefix{p("10.1.0.0/16")}, Uplink: "eth0"},
					"old":  {Name: "old", VNI: 5, Ranges: []netip.Prefix{p("10.5.0.0/16")}, Uplink: "eth0"},
				},
				Routes: map[Route]bool{
					{Network: "blue", Prefix: p("10.1.0.3/32"), Via: a("192.168.0.2")}: true,
					{Network: "blue", Prefix: p("10.1.0.4/32"), Via: a("192.168.0.3")}: true,
					{Network: "red", Prefix: p("10.1.0.2/32"), Via: a("192.168.0.2")}:  true,
				},
			},
			plan: []string{
				"route-del 10.1.0.2/32 via 192.168.0.2 network red",
				"route-del 10.1.0.4/32 via 192.168.0.3 network blue",
				"network-del old vni 5 [10.5.0.0/16] uplink eth0",
				"network-del red vni 77 [10.1.0.0/16] uplink eth0",
				"network-add red vni 88 [10.1.0.0/16] uplink eth0",
				"route-add 10.1.0.2/32 via 192.168.0.2 network red",
			},
		},
		{
			name: "converged: nothing to do",
			have: want,
		},
		{
			name: "a foreign network of a wanted name is left alone",
			have: State{Networks: map[string]*NetworkState{}, Routes: map[Route]bool{}, Foreign: map[string]bool{"red": true}},
			plan: []string{
				"network-add blue vni 56 [10.1.0.0/16] uplink eth0",
				"route-add 10.1.0.3/32 via 192.168.0.2 network blue",
			},
		},
		{
			// A remote pod claiming an address a local pod of this node holds (in the same
			// network) is not routed away from the local one.
			name: "a local address is never routed away",
			have: State{
				Networks: map[string]*NetworkState{}, Routes: map[Route]bool{}, Foreign: map[string]bool{"red": true},
				Taken: map[Route]bool{taken("blue", p("10.1.0.3/32")): true},
			},
			plan: []string{"network-add blue vni 56 [10.1.0.0/16] uplink eth0"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, x := range Plan(want, c.have) {
				got = append(got, x.String())
			}
			if strings.Join(got, "\n") != strings.Join(c.plan, "\n") {
				t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.plan, "\n"))
			}
		})
	}
}

func TestOwnedRoutesAreHostRoutesThroughATunnel(t *testing.T) {
	n := &NetworkState{Name: "blue", Ranges: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	tunnels := map[string]netip.Addr{"vxlan_tunnel0": netip.MustParseAddr("192.168.0.2")}
	p := netip.MustParsePrefix
	for _, c := range []struct {
		prefix, path string
		owned        bool
	}{
		{"10.1.0.3/32", "glean vxlan_tunnel0", true},
		{"10.1.0.3/32", "via 10.1.0.3 vxlan_tunnel0 02:00:00:00:00:01", true},
		{"10.1.0.0/16", "glean vxlan_tunnel0", false},
		{"10.1.0.3/32", "via 10.1.0.1 memif0/0 02:00:00:00:00:01", false},
		{"10.1.0.3/32", "receive", false},
		{"10.1.0.3/32", "glean vxlan_tunnel1", false},
	} {
		r, ok := OwnedRoutes(n, p(c.prefix), c.path, tunnels)
		if ok != c.owned {
			t.Errorf("%s %q: owned %v, want %v", c.prefix, c.path, ok, c.owned)
		}
		if ok && r.Via != netip.MustParseAddr("192.168.0.2") {
			t.Errorf("%s %q: via %s", c.prefix, c.path, r.Via)
		}
	}
}
