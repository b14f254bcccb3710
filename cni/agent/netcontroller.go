package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/cluster"
)

// NetworkResource is a veclane.dev Network resource as the agent reads it: the cluster
// network it asks for, or why it cannot be one.
type NetworkResource struct {
	Name    string
	Network cluster.Network
	Err     error
}

// NetworkFromSpec reads a Network resource's spec (vni, range, physicalNetworkName,
// podRoutes) into the cluster network of that name, checked as every record of etcd is
// (cluster.Network.Validate): the CRD's schema is the API server's check, this one is ours.
func NetworkFromSpec(name string, spec map[string]any) (cluster.Network, error) {
	n := cluster.Network{Name: name, Origin: cluster.OriginKubernetes}
	switch v := spec["vni"].(type) {
	case int64:
		if v < 0 || v >= 1<<24 {
			return n, fmt.Errorf("network %s: vni %d is not in 1..16777215", name, v)
		}
		n.VNI = uint32(v)
	case float64:
		if v != float64(int64(v)) || v < 0 || v >= 1<<24 {
			return n, fmt.Errorf("network %s: vni %v is not in 1..16777215", name, v)
		}
		n.VNI = uint32(v)
	default:
		return n, fmt.Errorf("network %s: spec.vni is missing or not an integer", name)
	}
	r, _ := spec["range"].(string)
	var err error
	if n.Range, err = netip.ParsePrefix(r); err != nil {
		return n, fmt.Errorf("network %s: spec.range %q: %v", name, r, err)
	}
	if v, ok := spec["physicalNetworkName"]; ok {
		if n.PhysicalNetwork, ok = v.(string); !ok {
			return n, fmt.Errorf("network %s: spec.physicalNetworkName is not a string", name)
		}
	}
	if v, ok := spec["podRoutes"]; ok {
		list, ok := v.([]any)
		if !ok {
			return n, fmt.Errorf("network %s: spec.podRoutes is not a list", name)
		}
		for _, x := range list {
			s, _ := x.(string)
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return n, fmt.Errorf("network %s: spec.podRoutes: %q: %v", name, s, err)
			}
			n.PodRoutes = append(n.PodRoutes, p)
		}
	}
	return n, n.Validate()
}

// syncNetworks is the network controller's pass, made by the agent that leads it (guard):
// etcd's networks become what the Network resources ask for. A resource's network is
// written when etcd lacks it or holds another; a network the controller wrote whose resource
// is gone is deleted. An operator's network (written with `veclane-agent network add`) is
// never touched: a resource of its name is reported. A resource that cannot be a network
// (NetworkFromSpec) is reported, and what etcd holds under its name is left as it is, so
// that a bad edit does not take a network away from its pods. What it did and could not do
// are returned; the error is etcd's.
func syncNetworks(ctx context.Context, s *cluster.Store, resources []NetworkResource, guard clientv3.Cmp) ([]string, []string, error) {
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]*cluster.Network{}
	for i := range snap.Networks {
		have[snap.Networks[i].Name] = &snap.Networks[i]
	}
	var done, problems []string
	asked := map[string]bool{}
	for _, r := range resources {
		asked[r.Name] = true
		if r.Err != nil {
			problems = append(problems, fmt.Sprintf("Network resource %s: %v: not applied (etcd keeps what it has of it)", r.Name, r.Err))
			continue
		}
		h := have[r.Name]
		if h != nil && h.Origin != cluster.OriginKubernetes {
			problems = append(problems, fmt.Sprintf("Network resource %s: an operator's network of that name is in etcd (veclane-agent network add): not applied", r.Name))
			continue
		}
		if h != nil && sameNetwork(h, &r.Network) {
			continue
		}
		if err := s.PutNetwork(ctx, r.Network, guard); err != nil {
			if errors.Is(err, cluster.ErrNotLeader) || ctx.Err() != nil {
				return done, problems, err
			}
			problems = append(problems, fmt.Sprintf("Network resource %s: %v: not applied", r.Name, err))
			continue
		}
		done = append(done, fmt.Sprintf("network %s from its resource: vni %d range %s", r.Name, r.Network.VNI, r.Network.Range))
	}
	for name, h := range have {
		if h.Origin != cluster.OriginKubernetes || asked[name] {
			continue
		}
		if err := s.DeleteNetwork(ctx, name, guard); err != nil {
			return done, problems, err
		}
		done = append(done, fmt.Sprintf("network %s deleted: its resource is gone", name))
	}
	return done, problems, nil
}

// sameNetwork says whether two records ask for the same network.
func sameNetwork(a, b *cluster.Network) bool {
	return a.VNI == b.VNI && a.Range == b.Range && a.PhysicalNetwork == b.PhysicalNetwork &&
		a.Origin == b.Origin && fmt.Sprint(a.PodRoutes) == fmt.Sprint(b.PodRoutes)
}
