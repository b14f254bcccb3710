package kube

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/ctl"
)

func ptr[T any](v T) *T { return &v }

func web() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10", "fd00::10"},
			Selector:   map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
				{Name: "sig", Port: 99, Protocol: corev1.ProtocolSCTP},
			},
			SessionAffinity: corev1.ServiceAffinityClientIP,
		},
	}
}

func slice(ns, svc, name string, port int32, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
		Endpoints:   eps,
	}
}

func ep(addr string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating}}
}

func TestServicesFromEndpointSlicesByNamespaceAndLabel(t *testing.T) {
	yes, no := ptr(true), ptr(false)
	slices := []discoveryv1.EndpointSlice{
		slice("shop", "web", "web-a", 8080, ep("10.244.0.1", nil, nil, nil), ep("10.244.0.2", no, yes, yes)),
		slice("shop", "web", "web-b", 8080, ep("10.244.0.3", no, no, nil), ep("10.244.0.1", yes, nil, nil)),
		// Another namespace's Service of the same name, and a slice named like ours but
		// labelled for another Service: neither is web's.
		slice("lab", "web", "web-a", 8080, ep("10.244.9.9", nil, nil, nil)),
		slice("shop", "api", "web-c", 8080, ep("10.244.8.8", nil, nil, nil)),
	}
	got, problems := Services(&World{}, "pods", web(), slices, false, netip.Addr{})
	if len(problems) != 1 || !strings.Contains(problems[0], "fd00::10") {
		t.Fatal(problems)
	}
	if len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	h := got[0]
	want := []ctl.Backend{
		{Addr: netip.MustParseAddr("10.244.0.1"), Port: 8080, State: "ready"},
		{Addr: netip.MustParseAddr("10.244.0.2"), Port: 8080, State: "terminating"},
		{Addr: netip.MustParseAddr("10.244.0.3"), Port: 8080, State: "not-ready"},
	}
	if h.Name != "svc/pods/shop/web:80/tcp" || h.VIP.String() != "10.96.0.10" || h.Port != 80 || h.Protocol != "tcp" || h.AffinitySeconds != 10800 || h.Network != "pods" || !reflect.DeepEqual(h.Backends, want) {
		t.Fatalf("%+v", h)
	}
	// The slices name no "dns" port: the UDP service has no backends.
	if d := got[1]; d.Name != "svc/pods/shop/web:53/udp" || d.Protocol != "udp" || len(d.Backends) != 0 {
		t.Fatalf("%+v", d)
	}
	if s := got[2]; s.Name != "svc/pods/shop/web:99/sctp" || s.Protocol != "sctp" || s.Port != 99 {
		t.Fatalf("%+v", s)
	}
}

func TestServicesOfASecondaryNetworkComeFromPods(t *testing.T) {
	w := world()
	w.Pods[1].Ready = false      // web2
	w.Pods[0].Terminating = true // web1, still ready
	svc := web()
	svc.Spec.ClusterIPs = nil
	svc.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}}
	got, _ := Services(w, "blue", svc, nil, true, netip.Addr{})
	// shop's app=web pods on blue: web1 (http 8080) and web2 (http 9090); not lab's web3,
	// not shop's red (another network).
	want := []ctl.Backend{
		{Addr: netip.MustParseAddr("10.1.0.1"), Port: 8080, State: "terminating"},
		{Addr: netip.MustParseAddr("10.1.0.2"), Port: 9090, State: "not-ready"},
	}
	if h := got[0]; !reflect.DeepEqual(h.Backends, want) || !h.Local || h.AffinitySeconds != 60 {
		t.Fatalf("%+v", h)
	}
	if d := got[1]; len(d.Backends) != 2 || d.Backends[0].Port != 5353 {
		t.Fatalf("%+v", d)
	}
	// Headless: nothing.
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	if got, _ := Services(w, "blue", svc, nil, true, netip.Addr{}); got != nil {
		t.Fatalf("%+v", got)
	}
}

// A NodePort Service's first cluster IP takes its NodePort, external IPs and load balancer
// IPs from the underlay: from the node's source address with the Cluster policy, from the
// client's with Local; without a source address the Cluster policy's entrances are left
// out and said. A ClusterIP Service's stray nodePort is nobody's entrance.
func TestExternalEntrances(t *testing.T) {
	svc := web()
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, TargetPort: intstr.FromInt32(8080)}}
	svc.Spec.ExternalIPs = []string{"198.51.100.7", "2001:db8::7"}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}, {Hostname: "lb.example"}}
	src := netip.MustParseAddr("10.244.0.250")
	got, problems := Services(&World{}, "pods", svc, nil, false, src)
	if len(got) != 1 || len(problems) != 2 || !strings.Contains(problems[1], "2001:db8::7") {
		t.Fatal(got, problems)
	}
	g := got[0]
	ips := []netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.9")}
	if g.NodePort != 30080 || !reflect.DeepEqual(g.ExternalIPs, ips) || g.ExternalLocal || g.ExternalSource == nil || *g.ExternalSource != src {
		t.Fatalf("%+v", g)
	}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	got, _ = Services(&World{}, "pods", svc, nil, false, netip.Addr{})
	if g := got[0]; g.NodePort != 30080 || !g.ExternalLocal || g.ExternalSource != nil {
		t.Fatalf("%+v", g)
	}
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	got, problems = Services(&World{}, "pods", svc, nil, false, netip.Addr{})
	if g := got[0]; g.NodePort != 0 || g.ExternalIPs != nil || !strings.Contains(strings.Join(problems, "\n"), "no source address") {
		t.Fatalf("%+v %v", g, problems)
	}
	plain := web()
	plain.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: 80, NodePort: 30081}}
	got, _ = Services(&World{}, "pods", plain, nil, false, src)
	if g := got[0]; g.NodePort != 0 || g.ExternalSource != nil {
		t.Fatalf("%+v", g)
	}
}
