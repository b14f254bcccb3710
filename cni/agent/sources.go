package agent

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ipam"
	"veclane.dev/cni/kube"
)

// A node's source address in a network: what external flows of a Service with
// externalTrafficPolicy Cluster (its NodePort, external IPs, load balancer IPs) reach their
// backends from. It must be an address of the network routed to this node, so that a
// backend on any node answers through this node, which translates the answer back. The
// agent claims one in the network's IPAM space (the whole Network range, lowest free first:
// the pods' allocations, named after the network too, skip it) under the attachment
// ipam.NodePrefix+node / sourceIfName, and records it as an attachment of this node, which
// makes every other node's agent route it here, as it routes a pod's address. It is claimed
// the first time a network needs one and kept (one address per node and network); CNI GC
// leaves such attachments alone (ipam.Reserved).

// sourceIfName is the interface name of a node's source address attachment.
const sourceIfName = "svc-source"

func sourceAttachment(node string) ipam.Attachment {
	return ipam.Attachment{ContainerID: ipam.NodePrefix + node, IfName: sourceIfName}
}

// externalNetworks are the networks (as DesiredStateful places Services) with a Service
// whose external flows need a source address: a NodePort, external IPs or load balancer IPs,
// and externalTrafficPolicy Cluster.
func externalNetworks(k *KubeObjects, defaultNet string) []string {
	set := map[string]bool{}
	for _, svc := range k.Services {
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal || !kube.Exposed(svc) {
			continue
		}
		network := defaultNet
		if ref, ok := svc.Annotations[kube.ServiceNetworkAnnotation]; ok {
			network = nadNetwork(k.NADs, svc.Namespace, ref)
		}
		if network != "" {
			set[network] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ensureSources returns node's source address in each of nets, claiming and recording the
// ones it lacks; a network that cannot have one (unknown, its range full, etcd refusing) is
// a problem, and its Services' external flows are left out.
func ensureSources(ctx context.Context, s *cluster.Store, al *ipam.Allocator, node string, nets []string) (map[string]netip.Addr, []string) {
	out := map[string]netip.Addr{}
	var problems []string
	for _, name := range nets {
		a, err := ensureSource(ctx, s, al, node, name)
		if err != nil {
			problems = append(problems, fmt.Sprintf("network %s: no source address for external flows on node %s: %v", name, node, err))
			continue
		}
		out[name] = a
	}
	return out, problems
}

func ensureSource(ctx context.Context, s *cluster.Store, al *ipam.Allocator, node, name string) (netip.Addr, error) {
	if al == nil {
		return netip.Addr{}, fmt.Errorf("the agent has no IPAM (etcd) to claim one from")
	}
	n, ok, err := s.Network(ctx, name)
	if err != nil {
		return netip.Addr{}, err
	}
	if !ok {
		return netip.Addr{}, fmt.Errorf("no such network")
	}
	cfg, err := ipam.ParseConfig([]byte(fmt.Sprintf(`{"network_name": %q, "range": %q}`, name, n.Range.String())))
	if err != nil {
		return netip.Addr{}, err
	}
	at := sourceAttachment(node)
	lease, err := al.Allocate(ctx, cfg, at)
	if err != nil {
		return netip.Addr{}, err
	}
	a := lease.Address.Addr()
	has, err := s.HasAttachment(ctx, name, at.ContainerID, at.IfName)
	if err != nil {
		return netip.Addr{}, err
	}
	if !has {
		rec := cluster.PodAttachment{Network: name, ContainerID: at.ContainerID, IfName: at.IfName, Node: node, Address: a}
		if err := s.PutAttachment(ctx, rec); err != nil {
			return netip.Addr{}, err
		}
	}
	return a, nil
}
