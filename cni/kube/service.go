package kube

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"veclane.dev/cni/ctl"
)

// ServiceNetworkAnnotation puts a Service in a secondary network (the multus-service
// convention): its value names the NetworkAttachmentDefinition ("name" in the Service's
// namespace, or "namespace/name"). Its backends are then the addresses in that network of
// the pods its selector picks, worked out here from the pods: the default network's
// EndpointSlices hold the pods' default-network addresses, which mean nothing in another.
const ServiceNetworkAnnotation = "k8s.v1.cni.cncf.io/service-network"

// ServicePrefix begins the name of every daemon service made from a Service
// ("svc/NETWORK/NAMESPACE/NAME:PORT/PROTO"): what marks it as Kubernetes'.
const ServicePrefix = "svc"

// maxBackends is the most backends the daemon takes for a service (api::MAX_BACKENDS).
const maxBackends = 4096

// defaultAffinitySeconds is Kubernetes' sessionAffinity ClientIP timeout when unset.
const defaultAffinitySeconds = 10800

// Services translates svc for network: one daemon service per IPv4 cluster IP and port
// (TCP, UDP and SCTP; IPv6 is said as a problem and left out). Backends come from the
// EndpointSlices given (the caller passes those of svc's namespace; only the ones labelled
// with svc's name count) when fromPods is false, else from the pods of w (a Service in a
// secondary network). A headless Service, or one without a selector in a secondary
// network, has none.
//
// A NodePort (of a NodePort or LoadBalancer Service), external IPs and load balancer
// ingress IPs are entrances from the underlay (Kubernetes' kube-proxy semantics), on the
// first cluster IP's services. With externalTrafficPolicy Cluster their flows reach backends
// from source, this node's address in the network (sources.go in the agent); without one,
// they are said as a problem and left out. With Local, only this node's backends take them,
// from the client's own address.
func Services(w *World, network string, svc *corev1.Service, slices []discoveryv1.EndpointSlice, fromPods bool, source netip.Addr) ([]ctl.ServiceAdd, []string) {
	var out []ctl.ServiceAdd
	var problems []string
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var vips []netip.Addr
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			return nil, nil
		}
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			problems = append(problems, fmt.Sprintf("service %s/%s: cluster IP %q is not IPv4: left out", svc.Namespace, svc.Name, s))
			continue
		}
		vips = append(vips, a)
	}
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	var affinity uint32
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		affinity = defaultAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			affinity = uint32(*c.ClientIP.TimeoutSeconds)
		}
	}
	externalIPs, p := externalAddrs(svc)
	problems = append(problems, p...)
	for _, port := range svc.Spec.Ports {
		proto := "tcp"
		switch port.Protocol {
		case corev1.ProtocolUDP:
			proto = "udp"
		case corev1.ProtocolSCTP:
			proto = "sctp"
		}
		var backends []ctl.Backend
		if fromPods {
			backends = podBackends(w, network, svc, port)
		} else {
			backends = sliceBackends(svc, port, slices)
		}
		if len(backends) > maxBackends {
			problems = append(problems, fmt.Sprintf("service %s/%s port %d: %d backends, the daemon takes %d: the rest left out", svc.Namespace, svc.Name, port.Port, len(backends), maxBackends))
			backends = backends[:maxBackends]
		}
		for k, vip := range vips {
			name := fmt.Sprintf("%s/%s/%s/%s:%d/%s", ServicePrefix, network, svc.Namespace, svc.Name, port.Port, proto)
			if k > 0 {
				name += "@" + vip.String()
			}
			s := ctl.ServiceAdd{
				Name: name, Network: network, VIP: vip, Port: uint16(port.Port), Protocol: proto,
				Backends: backends, Local: local, AffinitySeconds: affinity,
			}
			if k == 0 {
				problems = append(problems, external(&s, svc, port, externalIPs, source)...)
			}
			out = append(out, s)
		}
	}
	return out, problems
}

// sliceBackends reads the backends of one Service port from EndpointSlices: those of the
// Service's namespace labelled kubernetes.io/service-name with its name, IPv4 ones, the
// slice port of the same name and protocol. An endpoint is ready, else serving and
// terminating ("terminating"), else "not-ready" (Kubernetes' conditions; an unset ready
// means ready).
func sliceBackends(svc *corev1.Service, port corev1.ServicePort, slices []discoveryv1.EndpointSlice) []ctl.Backend {
	seen := map[ctl.Backend]bool{}
	backends := []ctl.Backend{}
	for i := range slices {
		s := &slices[i]
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name || s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		var target int32
		for _, p := range s.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == port.Name && proto == protoOr(port.Protocol) && p.Port != nil {
				target = *p.Port
			}
		}
		if target <= 0 || target > 65535 {
			continue
		}
		for _, e := range s.Endpoints {
			state := endpointState(e.Conditions)
			for _, a := range e.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil || !addr.Is4() {
					continue
				}
				b := ctl.Backend{Addr: addr, Port: uint16(target), State: state}
				if !seen[b] {
					seen[b] = true
					backends = append(backends, b)
				}
			}
		}
	}
	sortBackends(backends)
	return backends
}

func protoOr(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func endpointState(c discoveryv1.EndpointConditions) string {
	switch {
	case c.Ready == nil || *c.Ready:
		return "ready"
	case c.Serving != nil && *c.Serving && c.Terminating != nil && *c.Terminating:
		return "terminating"
	}
	return "not-ready"
}

// podBackends works out one Service port's backends in a secondary network: the pods of
// the Service's namespace its selector matches (every label), attached to network, at
// their targetPort (a number, or a container port's name on each pod). A pod being deleted
// is "terminating" while ready, a pod not ready "not-ready".
func podBackends(w *World, network string, svc *corev1.Service, port corev1.ServicePort) []ctl.Backend {
	backends := []ctl.Backend{}
	if len(svc.Spec.Selector) == 0 {
		return backends
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, p := range w.podsIn(network, func(ns string) bool { return ns == svc.Namespace }, sel) {
		target := uint16(port.Port)
		switch tp := port.TargetPort; {
		case tp.Type == intstr.String && tp.StrVal != "":
			n, ok := p.namedPort(tp.StrVal, protoOr(port.Protocol))
			if !ok {
				continue
			}
			target = n
		case tp.Type == intstr.Int && tp.IntVal > 0:
			target = uint16(tp.IntVal)
		}
		state := "ready"
		switch {
		case p.Ready && p.Terminating:
			state = "terminating"
		case !p.Ready:
			state = "not-ready"
		}
		backends = append(backends, ctl.Backend{Addr: p.Networks[network].Addr, Port: target, State: state})
	}
	sortBackends(backends)
	return backends
}

func sortBackends(b []ctl.Backend) {
	sort.Slice(b, func(i, j int) bool {
		if b[i].Addr != b[j].Addr {
			return b[i].Addr.Less(b[j].Addr)
		}
		return b[i].Port < b[j].Port
	})
}

// externalAddrs are svc's external IPs and its load balancer's ingress IPs, IPv4 ones
// (kube-proxy takes both alike); the others are said.
func externalAddrs(svc *corev1.Service) ([]netip.Addr, []string) {
	var out []netip.Addr
	var problems []string
	all := append([]string(nil), svc.Spec.ExternalIPs...)
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			all = append(all, in.IP)
		}
	}
	for _, s := range all {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() || !a.IsGlobalUnicast() && !a.IsPrivate() {
			problems = append(problems, fmt.Sprintf("service %s/%s: external IP %q is no IPv4 unicast address: left out", svc.Namespace, svc.Name, s))
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, problems
}

// external gives s its entrances from the underlay: the port's NodePort (NodePort and
// LoadBalancer Services), the external IPs, and the traffic policy with its source.
func external(s *ctl.ServiceAdd, svc *corev1.Service, port corev1.ServicePort, ips []netip.Addr, source netip.Addr) []string {
	s.NodePort = nodePort(svc, port)
	s.ExternalIPs = ips
	if s.NodePort == 0 && len(ips) == 0 {
		return nil
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		s.ExternalLocal = true
		return nil
	}
	if !source.IsValid() {
		s.NodePort, s.ExternalIPs = 0, nil
		return []string{fmt.Sprintf("service %s/%s port %d: network %s has no source address on this node for external flows: its NodePort and external IPs are left out", svc.Namespace, svc.Name, port.Port, s.Network)}
	}
	src := source
	s.ExternalSource = &src
	return nil
}

// nodePort is port's NodePort if svc has them (a NodePort or LoadBalancer Service), else 0.
func nodePort(svc *corev1.Service, port corev1.ServicePort) uint16 {
	typed := svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
	if typed && port.NodePort > 0 && port.NodePort <= 65535 {
		return uint16(port.NodePort)
	}
	return 0
}

// Exposed reports whether Services gives svc entrances from the underlay: a NodePort, or
// an external or load balancer IP it takes.
func Exposed(svc *corev1.Service) bool {
	for _, p := range svc.Spec.Ports {
		if nodePort(svc, p) != 0 {
			return true
		}
	}
	ips, _ := externalAddrs(svc)
	return len(ips) > 0
}
