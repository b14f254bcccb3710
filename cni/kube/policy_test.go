package kube

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/ctl"
)

// pod makes a pod on network "blue" at addr on node, with labels "k=v,...".
func pod(ns, name, node, addr, lbls string, ports ...corev1.ContainerPort) Pod {
	l := map[string]string{}
	for _, kv := range strings.Split(lbls, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			l[k] = v
		}
	}
	return Pod{
		Namespace: ns, Name: name, Labels: l, Ports: ports, Ready: true,
		Networks: map[string]Attachment{"blue": {Addr: netip.MustParseAddr(addr), Interface: "if-" + name, Node: node}},
	}
}

func world() *World {
	return &World{
		Namespaces: map[string]Namespace{
			"shop": {Name: "shop", Labels: map[string]string{"team": "a"}},
			"ops":  {Name: "ops", Labels: map[string]string{"team": "b"}},
			"lab":  {Name: "lab", Labels: map[string]string{"team": "a", "env": "test"}},
		},
		Pods: []Pod{
			pod("shop", "web1", "n1", "10.1.0.1", "app=web,tier=front", corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
			pod("shop", "web2", "n1", "10.1.0.2", "app=web", corev1.ContainerPort{Name: "http", ContainerPort: 9090}),
			pod("shop", "db", "n2", "10.1.0.3", "app=db,tier=back", corev1.ContainerPort{Name: "sql", ContainerPort: 5432}),
			pod("ops", "mon", "n1", "10.1.0.4", "app=mon"),
			pod("lab", "web3", "n2", "10.1.0.5", "app=web,tier=front", corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
			// Not on blue: never selected nor a peer there.
			{Namespace: "shop", Name: "red", Labels: map[string]string{"app": "web"}, Networks: map[string]Attachment{"red": {Addr: netip.MustParseAddr("10.9.0.1"), Interface: "if-red", Node: "n1"}}},
		},
	}
}

func ref() PolicyRef { return PolicyRef{Kind: "np", Network: "blue", Namespace: "shop", Name: "p"} }

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func members(np NodePolicy, name string) []string {
	for _, s := range np.Sets {
		if s.Name == ref().String()+"/"+name {
			var out []string
			for _, m := range s.Members {
				out = append(out, m.Addr().String())
			}
			return out
		}
	}
	return nil
}

func TestSelectorsNeedEveryLabelAndRespectNamespaces(t *testing.T) {
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "web"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				// Pods of the policy's namespace with both labels: web1 only (web2 lacks tier).
				{PodSelector: sel("app", "web", "tier", "front")},
				// Every pod of namespaces labelled team=a: shop's and lab's on blue.
				{NamespaceSelector: sel("team", "a")},
				// Both: app=web pods in team=a namespaces.
				{NamespaceSelector: sel("team", "a"), PodSelector: sel("app", "web")},
				// Both, with matchExpressions: namespaces with env, pods without tier=back.
				{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpExists}}}, PodSelector: &metav1.LabelSelector{}},
			},
		}},
	}
	np, problems := Policy(world(), ref(), &spec, "n1")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(np.Policies) != 1 || !reflect.DeepEqual(np.Policies[0].Interfaces, []string{"if-web1", "if-web2"}) {
		t.Fatalf("selected on n1: %+v", np.Policies)
	}
	if np.Policies[0].Egress != nil {
		t.Fatal("egress isolated without egress rules or policyTypes")
	}
	for name, want := range map[string][]string{
		"in0/0": {"10.1.0.1"},
		"in0/1": {"10.1.0.5", "10.1.0.3", "10.1.0.1", "10.1.0.2"},
		"in0/2": {"10.1.0.5", "10.1.0.1", "10.1.0.2"},
		"in0/3": {"10.1.0.5"},
	} {
		if got := members(np, name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	// On n2 only db would be selected, but it is no web pod: nothing there.
	np2, _ := Policy(world(), ref(), &spec, "n2")
	if len(np2.Policies) != 0 {
		t.Fatalf("n2: %+v", np2)
	}
}

func TestDirectionsAndEmptyLists(t *testing.T) {
	// policyTypes [Egress] with no rules: egress isolated, nothing allowed; ingress open.
	spec := networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}
	np, _ := Policy(world(), ref(), &spec, "n1")
	p := np.Policies[0]
	if p.Ingress != nil || p.Egress == nil || len(*p.Egress) != 0 {
		t.Fatalf("%+v", p)
	}
	// An ingress rule with no from and no ports allows everything.
	spec = networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}
	np, _ = Policy(world(), ref(), &spec, "n1")
	b, _ := json.Marshal(np.Policies[0].Ingress)
	if string(b) != `[{"peers":[],"ports":[]}]` {
		t.Fatal(string(b))
	}
}

func TestIPBlocksPortsAndProblems(t *testing.T) {
	udp := corev1.ProtocolUDP
	end := int32(2000)
	p80 := intstr.FromInt32(80)
	p1000 := intstr.FromInt32(1000)
	spec := networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32"}},
			},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &p80}, {Protocol: &udp, Port: &p1000, EndPort: &end}, {Protocol: &udp}},
		}},
	}
	np, problems := Policy(world(), ref(), &spec, "n1")
	if len(problems) != 1 || !strings.Contains(problems[0], "2001:db8::/32") {
		t.Fatal(problems)
	}
	want := []ctl.Rule{{
		Peers: []ctl.Peer{{CIDR: &ctl.CIDR{Prefix: netip.MustParsePrefix("192.0.2.0/24"), Except: []netip.Prefix{netip.MustParsePrefix("192.0.2.128/25")}}}},
		Ports: []ctl.PortMatch{
			{Protocol: "tcp", Port: &ctl.PortRange{First: 80, Last: 80}},
			{Protocol: "udp", Port: &ctl.PortRange{First: 1000, Last: 2000}},
			{Protocol: "udp"},
		},
	}}
	p := np.Policies[0]
	if !reflect.DeepEqual(*p.Egress, want) || p.Ingress == nil || len(*p.Ingress) != 0 {
		t.Fatalf("%+v", p)
	}
}

func TestNamedPortsResolvePerPod(t *testing.T) {
	http := intstr.FromString("http")
	spec := networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "web"),
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("app", "web")}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &http}},
		}},
	}
	np, problems := Policy(world(), ref(), &spec, "n1")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	// Ingress: web1's http is 8080, web2's 9090: two daemon policies.
	if len(np.Policies) != 2 {
		t.Fatalf("%+v", np.Policies)
	}
	for k, want := range []struct {
		iface string
		port  uint16
	}{{"if-web1", 8080}, {"if-web2", 9090}} {
		p := np.Policies[k]
		if !reflect.DeepEqual(p.Interfaces, []string{want.iface}) || (*p.Ingress)[0].Ports[0].Port.First != want.port {
			t.Fatalf("%d: %+v", k, p)
		}
	}
	// Egress: the peers' http, 8080 on web1 and web3, 9090 on web2.
	eg := *np.Policies[0].Egress
	if len(eg) != 2 || eg[0].Ports[0].Port.First != 8080 || eg[1].Ports[0].Port.First != 9090 {
		t.Fatalf("%+v", eg)
	}
	if got := members(np, "out0/http-tcp-8080"); !reflect.DeepEqual(got, []string{"10.1.0.5", "10.1.0.1"}) {
		t.Fatal(got)
	}
	// A pod without the named port gets an ingress rule that matches nothing: left out.
	spec.PodSelector = *sel("app", "mon")
	r := PolicyRef{Kind: "np", Network: "blue", Namespace: "ops", Name: "p"}
	np, _ = Policy(world(), r, &spec, "n1")
	if p := np.Policies[0]; len(*p.Ingress) != 0 {
		t.Fatalf("%+v", p)
	}
}
