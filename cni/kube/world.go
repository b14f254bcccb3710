// Package kube turns Kubernetes objects into what veclane's daemons enforce: Services and
// their EndpointSlices into services (ctl.ServiceAdd) per network, NetworkPolicies and
// MultiNetworkPolicies into policies on pod interfaces (ctl.PolicyAdd) whose peers are
// address sets (ctl.AddressSetAdd). It is pure: the caller gives it a snapshot of the
// objects (a World) and gets the specs back; watching the API and programming the daemons
// are elsewhere.
//
// Selectors mean what Kubernetes says they mean: a label selector matches a pod only if
// every one of its requirements does (metav1.LabelSelectorAsSelector), pods are looked for
// in the namespaces the object says (its own, or those its namespaceSelector picks), and
// EndpointSlices belong to a Service by namespace and the kubernetes.io/service-name label,
// never by name alone.
package kube

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Attachment is a pod's interface in one network.
type Attachment struct {
	// Addr is the pod's address in the network.
	Addr netip.Addr
	// Interface is the daemon's name for the pod's interface (where policies apply).
	Interface string
	// Node is the node the pod runs on (whose daemon holds the interface).
	Node string
}

// Pod is what the translation needs of a pod.
type Pod struct {
	Namespace string
	Name      string
	Labels    map[string]string
	// Ports are its containers' ports: what named ports resolve to.
	Ports []corev1.ContainerPort
	// Ready is the pod's Ready condition; Terminating that it is being deleted.
	Ready       bool
	Terminating bool
	// Networks holds the pod's attachments by network name.
	Networks map[string]Attachment
}

// Namespace is a namespace's name and labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// World is the snapshot the translation reads.
type World struct {
	Pods       []Pod
	Namespaces map[string]Namespace
}

// selector turns a label selector into a matcher; nil matches nothing (as a nil selector in
// a peer means "not given"), an empty one everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// podsIn returns the pods attached to network in the namespaces nsOK accepts whose labels
// sel matches, ordered by namespace and name.
func (w *World) podsIn(network string, nsOK func(string) bool, sel labels.Selector) []*Pod {
	var out []*Pod
	for i := range w.Pods {
		p := &w.Pods[i]
		if _, on := p.Networks[network]; !on || !nsOK(p.Namespace) {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// namespaces returns a test for namespace names: those whose labels sel matches.
func (w *World) namespaces(sel labels.Selector) func(string) bool {
	return func(name string) bool {
		ns, ok := w.Namespaces[name]
		return ok && sel.Matches(labels.Set(ns.Labels))
	}
}

// namedPort resolves a container port by name and protocol on p: its number, or false.
func (p *Pod) namedPort(name string, proto corev1.Protocol) (uint16, bool) {
	for _, c := range p.Ports {
		cp := c.Protocol
		if cp == "" {
			cp = corev1.ProtocolTCP
		}
		if c.Name == name && cp == proto && c.ContainerPort > 0 && c.ContainerPort < 65536 {
			return uint16(c.ContainerPort), true
		}
	}
	return 0, false
}

// hosts returns each pod's address in network as a /32, in the pods' order.
func hosts(pods []*Pod, network string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(pods))
	for _, p := range pods {
		a := p.Networks[network].Addr
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}
