package main

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The oracle on cases worked by hand from the NetworkPolicy documentation.
func TestOracle(t *testing.T) {
	ns := func(name, team string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
	}
	pod := func(nsName, name, app, ip string) Endpoint {
		return Endpoint{Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsName, Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}}},
			Addr: netip.MustParseAddr(ip)}
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	port := func(p int) []networkingv1.NetworkPolicyPort {
		x := intstr.FromInt32(int32(p))
		return []networkingv1.NetworkPolicyPort{{Port: &x}}
	}
	aWeb, aCli := pod("a", "a-web", "web", "10.0.0.1"), pod("a", "a-cli", "cli", "10.0.0.2")
	bWeb, bCli := pod("b", "b-web", "web", "10.0.1.1"), pod("b", "b-cli", "cli", "10.0.1.2")
	w := World{Namespaces: map[string]*corev1.Namespace{"a": ns("a", "x"), "b": ns("b", "y")}}
	check := func(what string, from, to Endpoint, p int32, want bool) {
		t.Helper()
		if got := w.Allowed(from, to, p); got != want {
			t.Errorf("%s: %s -> %s:%d = %v, want %v", what, from.Pod.Name, to.Pod.Name, p, got, want)
		}
	}
	check("no policy", bCli, aWeb, 80, true)
	// a-web takes a's cli pods on 80, and b's cli pods (namespace AND pod selector) on 81.
	w.Policies = []Policy{{Namespace: "a", Spec: networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "web"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "cli")}}, Ports: port(80)},
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "y"), PodSelector: sel("app", "cli")}}, Ports: port(81)},
		},
	}}}
	check("same namespace, its port", aCli, aWeb, 80, true)
	check("same namespace, another port", aCli, aWeb, 81, false)
	check("podSelector alone is the policy's namespace", bCli, aWeb, 80, false)
	check("namespace and pod selector", bCli, aWeb, 81, true)
	check("namespace, not pod", bWeb, aWeb, 81, false)
	check("a pod not selected is not isolated", bWeb, aCli, 80, true)
	// Separate peers are OR: b's namespace (any pod), or 10.0.0.2 by address, except itself.
	w.Policies = []Policy{{Namespace: "a", Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: sel("team", "y")},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.1/32"}}},
		}}},
	}}}
	check("namespace peer", bWeb, aCli, 80, true)
	check("ipBlock peer", aCli, aWeb, 80, true)
	check("ipBlock except", aWeb, aCli, 80, false)
	// Default deny egress in b (policyTypes Egress, no rules); a's ingress policy as above.
	w.Policies = append(w.Policies, Policy{Namespace: "b", Spec: networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "cli"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}})
	check("egress denied", bCli, aWeb, 80, false)
	check("another pod of b is not", bWeb, aWeb, 80, true)
	check("ingress to the denied pod is untouched", bWeb, bCli, 80, true)
	// Egress allowed to named port http of app=web pods anywhere.
	named := intstr.FromString("http")
	w.Policies[1].Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("app", "web")}},
		Ports: []networkingv1.NetworkPolicyPort{{Port: &named}},
	}}
	check("egress by named port", bCli, aWeb, 80, true)
	check("egress, not the named port", bCli, aWeb, 81, false)
	check("egress, not the selected pod", bCli, aCli, 80, false)
}
