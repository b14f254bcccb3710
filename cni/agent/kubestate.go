package agent

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/kube"
)

// PolicyForAnnotation names the NetworkAttachmentDefinitions a MultiNetworkPolicy applies to
// ("name" in its namespace, or "namespace/name", comma-separated), as the
// multi-networkpolicy project defines it.
const PolicyForAnnotation = "k8s.v1.cni.cncf.io/policy-for"

// MultiPolicy is a MultiNetworkPolicy (k8s.cni.cncf.io/v1beta1): its spec has the fields of
// a NetworkPolicy's.
type MultiPolicy struct {
	Namespace, Name string
	PolicyFor       string
	Spec            networkingv1.NetworkPolicySpec
}

// NAD is a NetworkAttachmentDefinition, with the veclane network its configuration names
// ("" if it is not veclane's).
type NAD struct {
	Namespace, Name string
	Network         string
}

// KubeObjects is what the agent reads of the Kubernetes API.
type KubeObjects struct {
	Pods          []*corev1.Pod
	Namespaces    []*corev1.Namespace
	Services      []*corev1.Service
	Slices        []*discoveryv1.EndpointSlice
	Policies      []*networkingv1.NetworkPolicy
	MultiPolicies []MultiPolicy
	NADs          []NAD
	// Networks are the Network resources, when NetworksServed (their CRD is installed and
	// watched): without it, no resource says nothing.
	Networks       []NetworkResource
	NetworksServed bool
	// Problems are objects that could not be read.
	Problems []string
}

// NADNetwork reads the veclane network a NetworkAttachmentDefinition's spec.config names: a
// veclane-cni configuration's network_name (else its name), alone or in a conflist.
func NADNetwork(config string) string {
	type conf struct {
		Type        string `json:"type"`
		Name        string `json:"name"`
		NetworkName string `json:"network_name"`
	}
	var c struct {
		conf
		Plugins []conf `json:"plugins"`
	}
	if json.Unmarshal([]byte(config), &c) != nil {
		return ""
	}
	for _, p := range append([]conf{c.conf}, c.Plugins...) {
		if p.Type == "veclane-cni" {
			if p.NetworkName != "" {
				return p.NetworkName
			}
			if p.Name != "" {
				return p.Name
			}
			return c.Name
		}
	}
	return ""
}

// World joins the pods of the API with their interfaces (the attachments in the cluster
// state, by the pod each names): the snapshot package kube translates. A pod that has
// finished, or runs in the host's network, has no interface of ours.
func World(k *KubeObjects, atts []cluster.PodAttachment) *kube.World {
	type key struct{ ns, name string }
	byPod := map[key][]*cluster.PodAttachment{}
	for i := range atts {
		a := &atts[i]
		if a.Pod != nil && a.Interface != nil {
			byPod[key{a.Pod.Namespace, a.Pod.Name}] = append(byPod[key{a.Pod.Namespace, a.Pod.Name}], a)
		}
	}
	w := &kube.World{Namespaces: map[string]kube.Namespace{}}
	for _, ns := range k.Namespaces {
		w.Namespaces[ns.Name] = kube.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	for _, p := range k.Pods {
		if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		kp := kube.Pod{
			Namespace: p.Namespace, Name: p.Name, Labels: p.Labels,
			Terminating: p.DeletionTimestamp != nil, Networks: map[string]kube.Attachment{},
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				kp.Ready = true
			}
		}
		for _, c := range p.Spec.Containers {
			kp.Ports = append(kp.Ports, c.Ports...)
		}
		for _, a := range byPod[key{p.Namespace, p.Name}] {
			if a.Pod.UID != "" && p.UID != "" && a.Pod.UID != string(p.UID) {
				continue // an earlier pod of the same name
			}
			kp.Networks[a.Network] = kube.Attachment{Addr: a.Address, Interface: a.Interface.Name, Node: a.Node}
		}
		w.Pods = append(w.Pods, kp)
	}
	return w
}

// DesiredStateful is what node's daemon must hold for the objects k: the services of every
// Service (in defaultNet, or in the network of the NetworkAttachmentDefinition its
// service-network annotation names), NetworkPolicies in defaultNet, MultiNetworkPolicies in
// the networks of the NADs their policy-for names. Problems are what cannot be enforced.
//
// sources are the node's source addresses for external flows, by network (sources.go).
func DesiredStateful(k *KubeObjects, atts []cluster.PodAttachment, node, defaultNet string, sources map[string]netip.Addr) (Stateful, []string) {
	w := World(k, atts)
	st := NewStateful()
	problems := append([]string(nil), k.Problems...)
	slices := map[string][]discoveryv1.EndpointSlice{}
	for _, s := range k.Slices {
		slices[s.Namespace] = append(slices[s.Namespace], *s)
	}
	for _, svc := range k.Services {
		network, fromPods := defaultNet, false
		if ref, ok := svc.Annotations[kube.ServiceNetworkAnnotation]; ok {
			network, fromPods = nadNetwork(k.NADs, svc.Namespace, ref), true
			if network == "" {
				problems = append(problems, fmt.Sprintf("service %s/%s: %s %q names no veclane network", svc.Namespace, svc.Name, kube.ServiceNetworkAnnotation, ref))
				continue
			}
		}
		specs, p := kube.Services(w, network, svc, slices[svc.Namespace], fromPods, sources[network])
		problems = append(problems, p...)
		for _, s := range specs {
			st.Services[s.Name] = s
		}
	}
	add := func(np kube.NodePolicy, p []string) {
		problems = append(problems, p...)
		for _, x := range np.Policies {
			st.Policies[x.Name] = x
		}
		for _, x := range np.Sets {
			st.Sets[x.Name] = x
		}
	}
	for _, np := range k.Policies {
		ref := kube.PolicyRef{Kind: kube.NetworkPolicyKind, Network: defaultNet, Namespace: np.Namespace, Name: np.Name}
		add(kube.Policy(w, ref, &np.Spec, node))
	}
	for _, mp := range k.MultiPolicies {
		nets := map[string]bool{}
		for _, ref := range strings.Split(mp.PolicyFor, ",") {
			ref = strings.TrimSpace(ref)
			if ref == "" {
				continue
			}
			if n := nadNetwork(k.NADs, mp.Namespace, ref); n != "" {
				nets[n] = true
			} else {
				problems = append(problems, fmt.Sprintf("multi-network policy %s/%s: %s %q names no veclane network", mp.Namespace, mp.Name, PolicyForAnnotation, ref))
			}
		}
		for _, n := range sorted(nets) {
			ref := kube.PolicyRef{Kind: kube.MultiNetworkPolicyKind, Network: n, Namespace: mp.Namespace, Name: mp.Name}
			add(kube.Policy(w, ref, &mp.Spec, node))
		}
	}
	return st, problems
}

// nadNetwork is the veclane network of the NAD ref names ("name" in namespace ns, or
// "namespace/name").
func nadNetwork(nads []NAD, ns, ref string) string {
	name := ref
	if n, nm, ok := strings.Cut(ref, "/"); ok {
		ns, name = n, nm
	}
	for _, d := range nads {
		if d.Namespace == ns && d.Name == name {
			return d.Network
		}
	}
	return ""
}
