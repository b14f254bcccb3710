package agent

import (
	"context"
	"encoding/json"
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

// hostNetwork is what a hostile attachment would change in the host's namespace: its links,
// addresses and every route.
func hostNetwork(t *testing.T) string {
	t.Helper()
	return testbin.Run(t, "ip", "-o", "link") + testbin.Run(t, "ip", "-o", "addr") + testbin.Run(t, "ip", "route", "show", "table", "all")
}

// Attachments anyone who can write to etcd could record on this node, restored by a real
// agent round into a real daemon: the one a pod's namespace, range and names vouch for is
// made (the tap in the pod, its address); the ones naming the host's namespace, routing the
// default route or another range, naming another interface or a memif socket on the host's
// file system, or written under another's key are refused, each reported, and the host's network is as it was.
func TestRestoreMakesOnlyAttachmentsThatStayInTheirPod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root for network namespaces")
	}
	srv := testetcd.Start(t)
	c := srv.Client(t)
	s := cluster.NewStore(c)
	ctx := context.Background()
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	if err := s.PutNetwork(ctx, cluster.Network{Name: "blue", VNI: 56, Range: p("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, cluster.Node{Name: "n1", VTEP: a("192.0.2.1")}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	name := testbin.Netns(t, "vlag")
	podNS := "/var/run/netns/" + name

	att := func(cid, netns string, routes ...netip.Prefix) cluster.PodAttachment {
		hostMAC, ourMAC := pod.MACs(cid, "eth1")
		return cluster.PodAttachment{Network: "blue", ContainerID: cid, IfName: "eth1", Node: "n1", Address: a("10.1.0.5"),
			Interface: &cluster.PodInterface{Kind: "tap", Netns: netns, Name: pod.DaemonName(cid, "eth1"),
				MAC: ourMAC.String(), HostMAC: hostMAC.String(), Gateway: a("169.254.1.1"), Routes: routes}}
	}
	blue := p("10.1.0.0/16")
	renamed := att("renamed", podNS, blue)
	renamed.Interface.Name = "uplink2"
	hostSocket := att("host-socket", podNS, blue)
	hostSocket.Interface.Kind, hostSocket.Interface.Socket = "memif", "/etc/veclane-test/memif.sock"
	refused := map[string]struct {
		att  cluster.PodAttachment
		want string
	}{
		"init-ns":       {att("init-ns", "/proc/1/ns/net", blue), "/proc/1/ns/net"},
		"agent-ns":      {att("agent-ns", fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), blue), "is the host's"},
		"elsewhere":     {att("elsewhere", "/tmp/netns", blue), "not where runtimes put a pod's"},
		"default-route": {att("default-route", podNS, p("0.0.0.0/0")), "route 0.0.0.0/0 is not inside the range"},
		"other-range":   {att("other-range", podNS, blue, p("192.168.7.0/24")), "route 192.168.7.0/24 is not inside the range"},
		"renamed":       {renamed, `interface name "uplink2" is not the plugin's`},
		"host-socket":   {hostSocket, `memif socket "/etc/veclane-test/memif.sock" is not abstract`},
	}
	for _, r := range refused {
		if err := s.PutAttachment(ctx, r.att); err != nil {
			t.Fatal(err)
		}
	}
	good := att("good", podNS, blue)
	if err := s.PutAttachment(ctx, good); err != nil {
		t.Fatal(err)
	}
	// A node's record under another node's key.
	b, _ := json.Marshal(cluster.Node{Name: "n2", VTEP: a("192.0.2.2")})
	if _, err := c.Put(ctx, cluster.Prefix+"nodes/n3", string(b)); err != nil {
		t.Fatal(err)
	}

	before := hostNetwork(t)
	_, d := startDaemon(t, t.TempDir())
	r := reconcile(t, s, d)
	if after := hostNetwork(t); after != before {
		t.Fatalf("the host's network changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat("/etc/veclane-test"); err == nil {
		t.Fatal("the daemon made a directory on the host's file system")
	}
	var pods []string
	for _, x := range r.Applied {
		if x.Kind == "pod-add" {
			pods = append(pods, x.Pod.ContainerID)
		}
	}
	if fmt.Sprint(pods) != "[good]" {
		t.Fatalf("restored %v, want only good; problems:\n%s", pods, strings.Join(r.Problems, "\n"))
	}
	problems := strings.Join(r.Problems, "\n")
	for cid, x := range refused {
		if !strings.Contains(problems, cid) || !strings.Contains(problems, x.want) {
			t.Errorf("%s: want %q in the problems:\n%s", cid, x.want, problems)
		}
	}
	if !strings.Contains(problems, `nodes/n3: the record names node "n2" but is under node "n3"'s key`) {
		t.Errorf("the node under another's key is not reported:\n%s", problems)
	}
	ifs, err := d.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, i := range ifs {
		if i.Pod != nil {
			made = append(made, i.Name)
		}
	}
	if fmt.Sprint(made) != fmt.Sprint([]string{good.Interface.Name}) {
		t.Fatalf("the daemon's pod interfaces: %v", made)
	}
	if out := testbin.Run(t, "ip", "-n", name, "-o", "-4", "addr", "show", "dev", "eth1"); !strings.Contains(out, "10.1.0.5/32") {
		t.Fatalf("the good pod's address is not on its tap: %s", out)
	}
	// Converged: the next round makes nothing, and says the same again.
	if r := reconcile(t, s, d); len(r.Applied) != 0 || len(r.Problems) != len(refused)+1 {
		t.Fatalf("second round: applied %v, problems:\n%s", r.Applied, strings.Join(r.Problems, "\n"))
	}
}
