package agent

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/cluster"
)

func kpod(ns, name, uid, app string, ready bool) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("u-" + uid), Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
}

func att(network, ns, name, uid, addr, node string) cluster.PodAttachment {
	return cluster.PodAttachment{
		Network: network, ContainerID: name + "-c", IfName: "eth0", Node: node, Address: netip.MustParseAddr(addr),
		Interface: &cluster.PodInterface{Kind: "tap", Name: network + "-" + name},
		Pod:       &cluster.PodRef{Namespace: ns, Name: name, UID: "u-" + uid},
	}
}

func TestTheAgentWantsWhatTheObjectsSay(t *testing.T) {
	k := &KubeObjects{
		Namespaces: []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}},
		Pods: []*corev1.Pod{
			kpod("shop", "web", "1", "web", true),
			kpod("shop", "cli", "2", "cli", true),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "host", Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{HostNetwork: true}},
		},
		NADs: []NAD{{Namespace: "shop", Name: "blue", Network: "blue"}, {Namespace: "shop", Name: "other", Network: ""}},
		Services: []*corev1.Service{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{
				ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-blue", Annotations: map[string]string{"k8s.v1.cni.cncf.io/service-network": "blue"}},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bad", Annotations: map[string]string{"k8s.v1.cni.cncf.io/service-network": "other"}},
				Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.11", Ports: []corev1.ServicePort{{Port: 80}}}},
		},
		Slices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "web-x", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(8080))}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.2"}}},
		}},
		Policies: []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "deny"}, Spec: networkingv1.NetworkPolicySpec{}}},
		MultiPolicies: []MultiPolicy{{Namespace: "shop", Name: "web-in", PolicyFor: "blue, shop/other", Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cli"}}}}}},
		}}},
	}
	atts := []cluster.PodAttachment{
		att("pods", "shop", "web", "1", "10.244.0.2", "n1"),
		att("blue", "shop", "web", "1", "10.1.0.2", "n1"),
		att("pods", "shop", "cli", "2", "10.244.0.3", "n2"),
		att("blue", "shop", "cli", "2", "10.1.0.3", "n2"),
		// A stale attachment of an earlier pod named web: not web's.
		att("red", "shop", "web", "0", "10.2.0.2", "n1"),
	}
	st, problems := DesiredStateful(k, atts, "n1", "pods", nil)
	if len(problems) != 2 || !strings.Contains(problems[0], `"other"`) || !strings.Contains(problems[1], `"shop/other"`) {
		t.Fatal(problems)
	}
	if got := sorted(st.Services); !reflect.DeepEqual(got, []string{"svc/blue/shop/web-blue:80/tcp", "svc/pods/shop/web:80/tcp"}) {
		t.Fatal(got)
	}
	if b := st.Services["svc/blue/shop/web-blue:80/tcp"].Backends; len(b) != 1 || b[0].Addr.String() != "10.1.0.2" || b[0].Port != 8080 {
		t.Fatalf("%+v", b)
	}
	if b := st.Services["svc/pods/shop/web:80/tcp"].Backends; len(b) != 1 || b[0].Addr.String() != "10.244.0.2" {
		t.Fatalf("%+v", b)
	}
	// The default-network policy selects web on n1 (cli is on n2), isolating its ingress.
	if got := sorted(st.Policies); !reflect.DeepEqual(got, []string{"mnp/blue/shop/web-in", "np/pods/shop/deny"}) {
		t.Fatal(got)
	}
	if p := st.Policies["np/pods/shop/deny"]; !reflect.DeepEqual(p.Interfaces, []string{"pods-web"}) || p.Ingress == nil || len(*p.Ingress) != 0 {
		t.Fatalf("%+v", p)
	}
	if p := st.Policies["mnp/blue/shop/web-in"]; !reflect.DeepEqual(p.Interfaces, []string{"blue-web"}) {
		t.Fatalf("%+v", p)
	}
	if s := st.Sets["mnp/blue/shop/web-in/in0/0"]; len(s.Members) != 1 || s.Members[0].String() != "10.1.0.3/32" {
		t.Fatalf("%+v", st.Sets)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestNADsNameTheirNetwork(t *testing.T) {
	for conf, want := range map[string]string{
		`{"type":"veclane-cni","name":"blue","network_name":"b"}`:                 "b",
		`{"type":"veclane-cni","name":"blue"}`:                                    "blue",
		`{"name":"list","plugins":[{"type":"tuning"},{"type":"veclane-cni"}]}`:    "list",
		`{"name":"list","plugins":[{"type":"veclane-cni","network_name":"red"}]}`: "red",
		`{"type":"bridge","name":"br"}`:                                           "",
		`not json`:                                                                "",
	} {
		if got := NADNetwork(conf); got != want {
			t.Errorf("%s: %q, want %q", conf, got, want)
		}
	}
}

// NADNetwork reads what any user may write into a NAD's config: never a panic, and a name
// only from a veclane-cni configuration.
func FuzzNADNetwork(f *testing.F) {
	for _, seed := range []string{
		`{"type":"veclane-cni","name":"blue","network_name":"b"}`,
		`{"name":"list","plugins":[{"type":"tuning"},{"type":"veclane-cni"}]}`,
		`{"plugins":null}`, `[]`, `"x"`, `{"type":1}`, ``,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, conf string) {
		if got := NADNetwork(conf); got != "" && !strings.Contains(conf, "veclane-cni") {
			t.Fatalf("%q names %q without veclane-cni", conf, got)
		}
	})
}
