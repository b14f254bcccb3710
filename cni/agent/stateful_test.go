package agent

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/ctl"
	"veclane.dev/cni/kube"
)

// want translates a Service and a NetworkPolicy of a small world (network "local", node
// n1) the way the agent does, with the policy or without.
func want(t *testing.T, backendPort int32, withPolicy bool) Stateful {
	t.Helper()
	w := &kube.World{
		Namespaces: map[string]kube.Namespace{"shop": {Name: "shop"}},
		Pods: []kube.Pod{
			{Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}, Ready: true,
				Networks: map[string]kube.Attachment{"local": {Addr: netip.MustParseAddr("10.50.0.2"), Interface: "pod-web", Node: "n1"}}},
			{Namespace: "shop", Name: "cli", Labels: map[string]string{"app": "cli"}, Ready: true,
				Networks: map[string]kube.Attachment{"local": {Addr: netip.MustParseAddr("10.50.0.3"), Interface: "pod-cli", Node: "n1"}}},
		},
	}
	st := NewStateful()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10", Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(backendPort)}},
		},
	}
	svcs, problems := kube.Services(w, "local", svc, nil, true, netip.Addr{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	for _, s := range svcs {
		st.Services[s.Name] = s
	}
	if withPolicy {
		spec := networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cli"}}}},
			}},
		}
		ref := kube.PolicyRef{Kind: kube.NetworkPolicyKind, Network: "local", Namespace: "shop", Name: "web"}
		np, problems := kube.Policy(w, ref, &spec, "n1")
		if len(problems) > 0 {
			t.Fatal(problems)
		}
		for _, p := range np.Policies {
			st.Policies[p.Name] = p
		}
		for _, s := range np.Sets {
			st.Sets[s.Name] = s
		}
	}
	return st
}

func names(d *Daemon, t *testing.T) []string {
	t.Helper()
	svcs, err := ctl.Call[ctl.Services](d.Client, ctl.ShowService{})
	if err != nil {
		t.Fatal(err)
	}
	pols, err := ctl.Call[ctl.Policies](d.Client, ctl.ShowPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range svcs.Services {
		out = append(out, "service "+s.Spec.Name)
	}
	for _, p := range pols.Report.Policies {
		out = append(out, "policy "+p.Name)
	}
	for _, s := range pols.Report.Sets {
		out = append(out, "address-set "+s.Name)
	}
	return out
}

func TestKubernetesObjectsReachTheDaemonAndLeaveIt(t *testing.T) {
	_, d := startDaemon(t, t.TempDir())
	// The operator's own objects: never touched.
	op := ctl.ServiceAdd{Name: "operator-dns", Network: "local", VIP: netip.MustParseAddr("10.96.0.53"), Port: 53, Protocol: "udp",
		Backends: []ctl.Backend{{Addr: netip.MustParseAddr("10.50.0.9"), Port: 53}}}
	if err := d.Do(op); err != nil {
		t.Fatal(err)
	}
	if err := d.Do(ctl.AddressSetAdd{Name: "operator-set"}); err != nil {
		t.Fatal(err)
	}
	var a StatefulApplier
	applied, failed, err := a.Apply(d, want(t, 8080, true))
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	all := []string{
		"address-set np/local/shop/web/in0/0", "policy np/local/shop/web", "service svc/local/shop/web:80/tcp",
	}
	if !reflect.DeepEqual(applied, all) {
		t.Fatalf("applied %v", applied)
	}
	pols, _ := ctl.Call[ctl.Policies](d.Client, ctl.ShowPolicy{})
	if p := pols.Report.Policies[0]; !reflect.DeepEqual(p.Interfaces, []string{"pod-web"}) || (*p.Ingress)[0].Peers[0].Set != "np/local/shop/web/in0/0" {
		t.Fatalf("%+v", p)
	}
	// Nothing changed: nothing sent.
	if applied, _, err := a.Apply(d, want(t, 8080, true)); err != nil || len(applied) != 0 {
		t.Fatalf("%v %v", applied, err)
	}
	// The daemon lost a service (it restarted, say): sent again, and only it.
	if err := d.Do(ctl.ServiceDel{Name: "svc/local/shop/web:80/tcp"}); err != nil {
		t.Fatal(err)
	}
	if applied, _, _ := a.Apply(d, want(t, 8080, true)); !reflect.DeepEqual(applied, []string{"service svc/local/shop/web:80/tcp"}) {
		t.Fatalf("%v", applied)
	}
	// The policy is gone and the backend port changed: the policy and its set deleted, the
	// service replaced; the operator's objects stay.
	applied, failed, err = a.Apply(d, want(t, 9090, false))
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	if !reflect.DeepEqual(applied, []string{
		"service svc/local/shop/web:80/tcp", "policy np/local/shop/web (deleted)", "address-set np/local/shop/web/in0/0 (deleted)",
	}) {
		t.Fatalf("applied %v", applied)
	}
	got := strings.Join(names(d, t), ",")
	if got != "service operator-dns,service svc/local/shop/web:80/tcp,address-set operator-set" {
		t.Fatal(got)
	}
	svcs, _ := ctl.Call[ctl.Services](d.Client, ctl.ShowService{})
	for _, s := range svcs.Services {
		if s.Spec.Name == "svc/local/shop/web:80/tcp" && s.Spec.Backends[0].Port != 9090 {
			t.Fatalf("%+v", s)
		}
	}
	// Everything of Kubernetes' goes; the operator's stays.
	if _, _, err := a.Apply(d, NewStateful()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(d, t), ","); got != "service operator-dns,address-set operator-set" {
		t.Fatal(got)
	}
}
