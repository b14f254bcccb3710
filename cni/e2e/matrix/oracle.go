package main

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The oracle: NetworkPolicy's meaning, evaluated directly for one connection from the
// objects, as the API's documentation states it. It shares nothing with the agent's
// translation (package kube compiles policies into address sets and rules for the daemon):
// the two agreeing on every connection of a matrix is the check.

// Endpoint is one side of a connection: a pod and its address on the network the connection
// is on.
type Endpoint struct {
	Pod  *corev1.Pod
	Addr netip.Addr
}

// World is what the oracle reads: namespaces (for their labels) and the policies that apply
// to the network a connection is on (NetworkPolicies for the default network, the
// MultiNetworkPolicies naming a secondary network for it).
type World struct {
	Namespaces map[string]*corev1.Namespace
	Policies   []Policy
}

// Policy is a NetworkPolicy's (or a MultiNetworkPolicy's) namespace and spec.
type Policy struct {
	Namespace string
	Spec      networkingv1.NetworkPolicySpec
}

// Allowed says whether a new TCP connection from `from` to `to` on port is allowed: the
// egress side in the client's namespace and the ingress side in the server's must both
// allow it.
func (w *World) Allowed(from, to Endpoint, port int32) bool {
	return w.side(networkingv1.PolicyTypeEgress, from, to, port) && w.side(networkingv1.PolicyTypeIngress, to, from, port)
}

// side evaluates one direction for pod `self`: not isolated (no policy of its namespace
// selects it for that direction), or some selecting policy has a rule whose peers hold
// `peer` and whose ports hold port (for egress the port is the peer's, for ingress self's).
func (w *World) side(dir networkingv1.PolicyType, self, peer Endpoint, port int32) bool {
	isolated := false
	for i := range w.Policies {
		p := &w.Policies[i]
		if p.Namespace != self.Pod.Namespace || !selects(&p.Spec.PodSelector, self.Pod.Labels) || !hasType(&p.Spec, dir) {
			continue
		}
		isolated = true
		if dir == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				if w.anyPeer(r.From, p.Namespace, peer) && anyPort(r.Ports, self.Pod, port) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Egress {
				if w.anyPeer(r.To, p.Namespace, peer) && anyPort(r.Ports, peer.Pod, port) {
					return true
				}
			}
		}
	}
	return !isolated
}

// hasType: policyTypes as given, else Ingress, and Egress if there are egress rules.
func hasType(s *networkingv1.NetworkPolicySpec, dir networkingv1.PolicyType) bool {
	if len(s.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(s.Egress) > 0
	}
	for _, t := range s.PolicyTypes {
		if t == dir {
			return true
		}
	}
	return false
}

// anyPeer: no peers is everyone; else one peer must hold ep.
func (w *World) anyPeer(peers []networkingv1.NetworkPolicyPeer, policyNS string, ep Endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if w.peerHolds(&p, policyNS, ep) {
			return true
		}
	}
	return false
}

func (w *World) peerHolds(p *networkingv1.NetworkPolicyPeer, policyNS string, ep Endpoint) bool {
	if p.IPBlock != nil {
		cidr, err := netip.ParsePrefix(p.IPBlock.CIDR)
		if err != nil || !cidr.Contains(ep.Addr) {
			return false
		}
		for _, e := range p.IPBlock.Except {
			if x, err := netip.ParsePrefix(e); err == nil && x.Contains(ep.Addr) {
				return false
			}
		}
		return true
	}
	// The namespace: the policy's own without a namespaceSelector, else those it selects.
	if p.NamespaceSelector == nil {
		if ep.Pod.Namespace != policyNS {
			return false
		}
	} else {
		ns := w.Namespaces[ep.Pod.Namespace]
		if ns == nil || !selects(p.NamespaceSelector, ns.Labels) {
			return false
		}
	}
	return p.PodSelector == nil || selects(p.PodSelector, ep.Pod.Labels)
}

// anyPort: no ports is every port; else one must hold port (TCP) on the server pod.
func anyPort(ports []networkingv1.NetworkPolicyPort, server *corev1.Pod, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		if p.Port.IntVal != 0 || p.Port.StrVal == "" {
			lo, hi := p.Port.IntVal, p.Port.IntVal
			if p.EndPort != nil {
				hi = *p.EndPort
			}
			if port >= lo && port <= hi {
				return true
			}
			continue
		}
		for _, c := range server.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == p.Port.StrVal && cp.ContainerPort == port && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
					return true
				}
			}
		}
	}
	return false
}

// selects: every label and expression of the selector holds (an empty selector selects all).
func selects(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}
