package agent

import (
	"fmt"
	"net/netip"

	"github.com/containernetworking/plugins/pkg/ns"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/pod"
)

// The node's link into a network (Config.NodeLink): a tap whose host side NodeLinkIfName
// is in the host's namespace (the agent's and the daemon's), addressed as a pod's interface
// is, link-local on both sides: the host holds NodeLinkHostAddr and reaches the network's
// range through veclane's side, pod.Gateway; veclane routes the node's address through
// NodeLinkHostAddr. Pods reach the node (and whatever the node reaches: the API server behind
// the `kubernetes` Service), and the node its pods.
const (
	NodeLinkIfName = "vl-host"
	// NodeLinkName is the daemon's name for the link.
	NodeLinkName = "host"
)

// NodeLinkHostAddr is the host's side of the node link.
var NodeLinkHostAddr = netip.MustParseAddr("169.254.1.2")

// nodeLink is the node link into network n of node self (address nodeAddr), as the pod
// package makes a pod's interface: the host is the "pod", with any source (it sends from the
// node's addresses), the network's range routed through the link.
func nodeLink(self string, nodeAddr netip.Addr, n *cluster.Network) *cluster.PodAttachment {
	hostMAC, ourMAC := pod.MACs("node/"+self, NodeLinkIfName)
	return &cluster.PodAttachment{
		Network: n.Name, IfName: NodeLinkIfName, Node: self, Address: NodeLinkHostAddr,
		Interface: &cluster.PodInterface{
			Kind: "tap", Name: NodeLinkName, MTU: 1500, HostMAC: hostMAC.String(), MAC: ourMAC.String(),
			Gateway: pod.Gateway, Routes: []netip.Prefix{n.Range}, AnySource: true,
		},
	}
}

// ensureNodeLink makes the node link into network cfg.NodeLink when the daemon lacks it (it
// restarted, or the network was just made), on both sides, and routes the node's address
// (cfg.Node.VTEP) through it. Nothing when the cluster has no such network or the daemon
// does not hold it yet (a problem is reported; the next round tries again).
func ensureNodeLink(d *Daemon, snap *cluster.Snapshot, cfg *Config, round *Round) error {
	self, network, nodeAddr := cfg.Node.Name, cfg.NodeLink, cfg.Node.VTEP
	var n *cluster.Network
	for i := range snap.Networks {
		if snap.Networks[i].Name == network {
			n = &snap.Networks[i]
		}
	}
	if n == nil {
		round.Problems = append(round.Problems, fmt.Sprintf("node link: network %s is not in the cluster", network))
		return nil
	}
	if _, err := d.Interface(NodeLinkName); err == nil {
		return nil
	} else if !ctl.NoInterface(err) {
		return err
	}
	nets, err := d.Networks()
	if err != nil {
		return err
	}
	held := false
	for _, h := range nets {
		held = held || h.Name == network
	}
	if !held {
		round.Problems = append(round.Problems, fmt.Sprintf("node link: the daemon has no network %s yet", network))
		return nil
	}
	a := nodeLink(self, nodeAddr, n)
	act := Action{Kind: "node-link", Pod: a}
	if err := pod.Attach(d.Client, a); err != nil {
		if !ctl.Refused(err) {
			return fmt.Errorf("%s: %w", act, err)
		}
		round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", act, err))
		return nil
	}
	host, err := ns.GetCurrentNS()
	if cfg.NodeLinkNetns != "" {
		host, err = ns.GetNS(cfg.NodeLinkNetns)
	}
	if err == nil {
		err = pod.Configure(a, host)
		_ = host.Close()
	}
	if err == nil {
		err = d.Do(ctl.IPRoute{Add: true, Route: ctl.RouteSpec{
			Prefix: netip.PrefixFrom(nodeAddr, 32), Via: NodeLinkHostAddr.String(), Interface: NodeLinkName, Network: network,
		}})
	}
	if err != nil {
		// Deleted, so that the next round tries the whole again.
		_ = d.DeleteInterface(NodeLinkName)
		round.Failed = append(round.Failed, fmt.Sprintf("%s: %v", act, err))
		return nil
	}
	round.Applied = append(round.Applied, act)
	return nil
}
