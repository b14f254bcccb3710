package agent

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/pod"
)

// Service routes in real namespaces: a pod on blue gets blue's cluster IPs through net1, a
// pod on red red's, nothing for the default network's or another node's pods, an operator's
// route stays, a service gone takes its route, and an unchanged round looks at nothing.
func TestServiceRoutesGoThroughEachSecondaryNetwork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root for network namespaces")
	}
	a := netip.MustParseAddr
	mk := func(name string) string {
		n := testbin.Netns(t, "vlsr"+name)
		testbin.Run(t, "ip", "-n", n, "link", "add", "net1", "type", "veth", "peer", "name", "p1")
		testbin.Run(t, "ip", "-n", n, "link", "set", "net1", "up")
		testbin.Run(t, "ip", "-n", n, "link", "set", "p1", "up")
		testbin.Run(t, "ip", "-n", n, "link", "set", "lo", "up") // as in a pod: else no on-link gateway
		return n
	}
	blueNS, redNS := mk("b"), mk("r")
	testbin.Run(t, "ip", "-n", blueNS, "route", "add", "192.0.2.0/24", "dev", "net1")
	att := func(network, netns, node string) cluster.PodAttachment {
		return cluster.PodAttachment{Network: network, ContainerID: "c-" + netns, IfName: "net1", Node: node, Address: a("10.1.0.5"),
			Interface: &cluster.PodInterface{Kind: "tap", Netns: "/var/run/netns/" + netns, Name: "x", Gateway: pod.Gateway}}
	}
	atts := []cluster.PodAttachment{att("blue", blueNS, "n1"), att("red", redNS, "n1"), att("blue", redNS, "n2")}
	want := NewStateful()
	svc := func(name, network, vip string) {
		want.Services[name] = ctl.ServiceAdd{Name: name, Network: network, VIP: a(vip), Port: 80, Protocol: "tcp"}
	}
	svc("svc/blue/ns/web:80/tcp", "blue", "10.96.0.10")
	svc("svc/blue/ns/web:443/tcp", "blue", "10.96.0.10")
	svc("svc/blue/ns/db:80/tcp", "blue", "10.96.0.11")
	svc("svc/red/ns/web:80/tcp", "red", "10.96.0.20")
	svc("svc/pods/default/kubernetes:443/tcp", "pods", "10.96.0.1")
	routes := func(n string) string {
		return testbin.Run(t, "ip", "-n", n, "-4", "route", "show", "dev", "net1")
	}
	var r StatefulApplier
	applied, problems := r.RoutePods(want, atts, "n1", "pods", nil)
	if len(problems) > 0 || len(applied) != 2 {
		t.Fatalf("applied %v problems %v", applied, problems)
	}
	b, rd := routes(blueNS), routes(redNS)
	for _, x := range []string{"10.96.0.10 via 169.254.1.1 proto 118 onlink", "10.96.0.11 via", "192.0.2.0/24"} {
		if !strings.Contains(b, x) {
			t.Errorf("blue's pod lacks %q:\n%s", x, b)
		}
	}
	if strings.Contains(b, "10.96.0.20") || strings.Contains(b, "10.96.0.1 ") || !strings.Contains(rd, "10.96.0.20 via") ||
		strings.Contains(rd, "10.96.0.10") || strings.Contains(rd, "10.96.0.11") || strings.Contains(rd, "10.96.0.1 ") {
		t.Fatalf("blue's pod:\n%s\nred's pod:\n%s", b, rd)
	}
	if applied, _ := r.RoutePods(want, atts, "n1", "pods", nil); len(applied) != 0 {
		t.Fatalf("unchanged, yet %v", applied)
	}
	delete(want.Services, "svc/blue/ns/db:80/tcp")
	if applied, _ := r.RoutePods(want, atts, "n1", "pods", nil); fmt.Sprint(applied) != fmt.Sprintf("[pod c-%s interface net1: service routes deleted 10.96.0.11/32]", blueNS) {
		t.Fatalf("%v", applied)
	}
	if b := routes(blueNS); strings.Contains(b, "10.96.0.11") || !strings.Contains(b, "192.0.2.0/24") || !strings.Contains(b, "10.96.0.10") {
		t.Fatalf("blue's pod:\n%s", b)
	}
	// A route deleted behind the agent's back comes back when the pod is restored.
	testbin.Run(t, "ip", "-n", blueNS, "route", "del", "10.96.0.10/32", "dev", "net1")
	restored := map[string]bool{"c-" + blueNS + "/net1": true}
	if applied, _ := r.RoutePods(want, atts, "n1", "pods", restored); len(applied) != 1 || !strings.Contains(routes(blueNS), "10.96.0.10") {
		t.Fatalf("%v:\n%s", applied, routes(blueNS))
	}
}
