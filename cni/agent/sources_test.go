package agent

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testetcd"
	"veclane.dev/cni/ipam"
)

// A node claims one source address per network that needs one, keeps it, records it as its
// attachment (so other nodes route it here), and CNI GC leaves both alone; an unknown
// network is a problem.
func TestSourcesAreClaimedOnceAndKept(t *testing.T) {
	srv := testetcd.Start(t)
	c := srv.Client(t)
	s := cluster.NewStore(c)
	ctx := context.Background()
	if err := s.PutNetwork(ctx, cluster.Network{Name: "blue", VNI: 2, Range: netip.MustParsePrefix("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	al := ipam.New(c, "n1")
	// A pod has the lowest address already: the source address is another.
	cfg, _ := ipam.ParseConfig([]byte(`{"network_name": "blue", "range": "10.1.0.0/16"}`))
	pod, err := al.Allocate(ctx, cfg, ipam.Attachment{ContainerID: "c1", IfName: "eth1"})
	if err != nil {
		t.Fatal(err)
	}
	got, problems := ensureSources(ctx, s, al, "n1", []string{"blue", "nowhere"})
	src := got["blue"]
	if !src.IsValid() || src == pod.Address.Addr() || len(problems) != 1 || !strings.Contains(problems[0], "nowhere") {
		t.Fatal(got, problems)
	}
	again, _ := ensureSources(ctx, s, ipam.New(c, "n1"), "n1", []string{"blue"})
	if !reflect.DeepEqual(again, map[string]netip.Addr{"blue": src}) {
		t.Fatal(again)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range snap.Attachments {
		found = found || a.Node == "n1" && a.Address == src && a.ContainerID == ipam.NodePrefix+"n1"
	}
	if !found {
		t.Fatalf("no attachment for %s: %+v", src, snap.Attachments)
	}
	// GC with no valid attachment at all releases the pod's address, not the node's.
	if _, err := al.GC(ctx, "blue", nil); err != nil {
		t.Fatal(err)
	}
	left, _ := al.List(ctx, "blue")
	if len(left) != 1 || left[0].Address != src {
		t.Fatalf("after GC: %+v", left)
	}
}

// Only Services whose external flows take the Cluster policy need a source address, in the
// network they are in.
func TestExternalNetworks(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, local bool, ann map[string]string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann}}
		s.Spec.Type = typ
		s.Spec.Ports = []corev1.ServicePort{{Port: 80, NodePort: 30080}}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		return s
	}
	k := &KubeObjects{
		Services: []*corev1.Service{
			svc("a", corev1.ServiceTypeClusterIP, false, nil),
			svc("b", corev1.ServiceTypeNodePort, true, nil),
			svc("c", corev1.ServiceTypeLoadBalancer, false, map[string]string{"k8s.v1.cni.cncf.io/service-network": "blue-nad"}),
			svc("d", corev1.ServiceTypeNodePort, false, nil),
		},
		NADs: []NAD{{Namespace: "ns", Name: "blue-nad", Network: "blue"}},
	}
	if got := externalNetworks(k, "pods"); !reflect.DeepEqual(got, []string{"blue", "pods"}) {
		t.Fatal(got)
	}
}
