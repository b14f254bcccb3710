// Package agent is the node agent's logic: from the cluster's state in etcd (package cluster)
// it works out what its node's daemon must hold (every network, and a route to every pod of
// the network on another node, through the VXLAN tunnel to that node's VTEP), compares it
// with what the daemon holds, and applies the difference through the daemon's control API.
// Applying the difference from scratch is also how it recovers after its own restart, the
// daemon's, or etcd's: nothing is remembered between rounds.
package agent

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"veclane.dev/cni/cluster"
)

// Uplinks maps physical networks to this node's uplink interfaces ("" is the default uplink).
// An uplink "" keeps the physical network's networks on this node: no tunnels, no routes to
// other nodes' pods.
type Uplinks map[string]string

// Route is a route the agent owns: a remote pod's address, in its network's VRF, through the
// tunnel to the VTEP of the node it is on.
type Route struct {
	Network string
	Prefix  netip.Prefix
	Via     netip.Addr
}

func (r Route) String() string {
	return fmt.Sprintf("%s via %s network %s", r.Prefix, r.Via, r.Network)
}

// NetworkState is a network as the daemon holds it (or should).
type NetworkState struct {
	Name   string
	VNI    uint32
	Ranges []netip.Prefix
	Uplink string
	// Table is the network's VRF on the daemon (actual state only).
	Table uint32
	// Interfaces attached to it (actual state only): a network with interfaces cannot be
	// deleted.
	Interfaces []string
}

func (n *NetworkState) same(o *NetworkState) bool {
	return n.VNI == o.VNI && n.Uplink == o.Uplink && fmt.Sprint(n.Ranges) == fmt.Sprint(o.Ranges)
}

// State is what a daemon holds, or should, of what the agent manages.
type State struct {
	Networks map[string]*NetworkState
	Routes   map[Route]bool
	// Foreign names the daemon's networks the agent did not create (actual state only): it
	// never touches them, nor creates a network of the same name.
	Foreign map[string]bool
	// Taken holds the host routes of the agent's networks that are not the agent's (actual
	// state only): a local pod's address, an operator's route. The agent never routes such
	// an address to another node: a remote pod claiming it is a conflict, reported.
	Taken map[Route]bool
}

// taken is the key of State.Taken for a network's host route.
func taken(network string, p netip.Prefix) Route { return Route{Network: network, Prefix: p} }

// Desired computes what node `self` must hold: every valid network whose physical network
// has an uplink here, and a /32 route to every pod of those networks on another registered
// node (snap.Nodes: Reconcile adds the nodes still in their grace, see nodeMemory). Pods of
// a node that is not there get no route, so their routes go when the node goes. Problems (a network without an uplink here) are returned
// beside the state, which omits them. An attachment outside its network's range never gets
// here: the snapshot refuses it (cluster.Store.Snapshot).
func Desired(snap *cluster.Snapshot, self string, uplinks Uplinks) (State, []string) {
	st := State{Networks: map[string]*NetworkState{}, Routes: map[Route]bool{}}
	var problems []string
	for _, n := range snap.Networks {
		up, ok := uplinks[n.PhysicalNetwork]
		if !ok {
			problems = append(problems, fmt.Sprintf("network %s: physical network %q has no uplink on node %s", n.Name, n.PhysicalNetwork, self))
			continue
		}
		st.Networks[n.Name] = &NetworkState{Name: n.Name, VNI: n.VNI, Ranges: []netip.Prefix{n.Range}, Uplink: up}
	}
	vtep := map[string]netip.Addr{}
	for _, n := range snap.Nodes {
		vtep[n.Name] = n.VTEP
	}
	for _, p := range snap.Attachments {
		if p.Node == self {
			continue
		}
		if _, ok := st.Networks[p.Network]; !ok {
			continue
		}
		via, registered := vtep[p.Node]
		if !registered {
			continue
		}
		if st.Networks[p.Network].Uplink == "" {
			problems = append(problems, fmt.Sprintf("network %s: pod %s on node %s is not reachable from node %s: the network has no uplink here (--uplink none)", p.Network, p.Address, p.Node, self))
			continue
		}
		st.Routes[Route{Network: p.Network, Prefix: netip.PrefixFrom(p.Address, 32), Via: via}] = true
	}
	return st, problems
}

// Action is one change to the daemon.
type Action struct {
	// Kind: "route-del", "network-del", "network-add" or "route-add", in the order a plan
	// applies them (routes go before the networks they are in, networks come before routes).
	// "pod-add" (after a plan, see Reconcile) makes a local pod's interface again.
	Kind    string
	Network *NetworkState
	Route   Route
	Pod     *cluster.PodAttachment
	// Detail says what a "kubernetes" action (a service, policy or address set applied from
	// the Kubernetes API) did.
	Detail string
}

func (a Action) String() string {
	switch a.Kind {
	case "pod-add":
		return fmt.Sprintf("pod-add %s (container %s interface %s, %s) network %s", a.Pod.Interface.Name, a.Pod.ContainerID, a.Pod.IfName, a.Pod.Address, a.Pod.Network)
	case "network-add", "network-del":
		return fmt.Sprintf("%s %s vni %d %v uplink %s", a.Kind, a.Network.Name, a.Network.VNI, a.Network.Ranges, a.Network.Uplink)
	case "kubernetes":
		return a.Detail
	default:
		return a.Kind + " " + a.Route.String()
	}
}

// Plan lists the actions that turn `have` into `want`: routes the agent owns that are not
// wanted are deleted; networks that are not wanted, or differ (VNI, range, uplink: a network
// is replaced, never edited), are deleted, and wanted ones added; missing routes are added.
// A route whose network is replaced is deleted and added again with it. A wanted network
// whose name a foreign network of the daemon holds is left out, with its routes (Reconcile
// reports it).
func Plan(want, have State) []Action {
	var dels, netDels, netAdds, adds []Action
	replaced := map[string]bool{}
	for name, h := range have.Networks {
		w, ok := want.Networks[name]
		if !ok || !w.same(h) {
			netDels = append(netDels, Action{Kind: "network-del", Network: h})
			replaced[name] = true
		}
	}
	for name, w := range want.Networks {
		if have.Foreign[name] {
			continue
		}
		if h, ok := have.Networks[name]; !ok || replaced[name] || !w.same(h) {
			netAdds = append(netAdds, Action{Kind: "network-add", Network: w})
		}
	}
	for r := range have.Routes {
		if !want.Routes[r] || replaced[r.Network] {
			dels = append(dels, Action{Kind: "route-del", Route: r})
		}
	}
	for r := range want.Routes {
		if have.Foreign[r.Network] {
			continue
		}
		if have.Taken[taken(r.Network, r.Prefix)] {
			continue
		}
		if !have.Routes[r] || replaced[r.Network] {
			adds = append(adds, Action{Kind: "route-add", Route: r})
		}
	}
	for _, l := range [][]Action{dels, netDels, netAdds, adds} {
		sort.Slice(l, func(i, j int) bool { return l[i].String() < l[j].String() })
	}
	out := append(dels, netDels...)
	out = append(out, netAdds...)
	return append(out, adds...)
}

// OwnedRoutes picks, out of a network's FIB entries (prefix and the daemon's path text), the
// routes the agent owns: host routes (/32) that leave through one of the network's VXLAN
// tunnels (`tunnels`: tunnel interface name to remote VTEP). The FIB shows how a route
// forwards (`glean vxlan_tunnel0` until the pod's MAC is learned, then `via 10.1.0.3
// vxlan_tunnel0 02:..`), so the route's next hop is the tunnel's remote VTEP. An operator's
// static host route through a tunnel of a network the agent manages is taken for the agent's,
// and removed if etcd does not want it.
func OwnedRoutes(n *NetworkState, prefix netip.Prefix, path string, tunnels map[string]netip.Addr) (Route, bool) {
	if prefix.Bits() != 32 {
		return Route{}, false
	}
	for _, f := range strings.Fields(path) {
		if vtep, ok := tunnels[f]; ok {
			return Route{Network: n.Name, Prefix: prefix, Via: vtep}, true
		}
	}
	return Route{}, false
}
