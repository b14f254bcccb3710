// Package pod makes a pod's interface on a veclane network, on both sides: in the daemon (the
// tap or memif interface, a host route to the pod's address through it, a static neighbour
// for the pod's MAC) and in the pod's namespace (its address as a /32, the network reached
// through a gateway it never has to ARP for). The CNI plugin does it at ADD; the node agent
// does it again, from the attachment recorded in etcd, when the daemon restarted and lost it.
package pod

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
)

// Gateway is a pod's default next hop on a network: a link-local address no pod has,
// answered by nothing (the pod holds a permanent neighbour entry for it, the daemon's MAC).
var Gateway = netip.MustParseAddr("169.254.1.1")

// DaemonName is the pod interface's name in the daemon: the same for the same (container,
// interface), so DEL and CHECK find it without state of their own.
func DaemonName(containerID, ifName string) string {
	h := sha256.Sum256([]byte(containerID))
	return fmt.Sprintf("pod-%x-%s", h[:5], ifName)
}

// MACs are the two ends' MACs, derived from the container and interface so that an
// interface made again (a repeated ADD, the agent after a daemon restart) has the same and
// the pod's neighbour entry for its gateway stays right: (pod's side, daemon's side).
func MACs(containerID, ifName string) (net.HardwareAddr, net.HardwareAddr) {
	h := sha256.Sum256([]byte(containerID + "/" + ifName))
	return net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]},
		net.HardwareAddr{0x02, 0xfe, h[5], h[6], h[7], h[8]}
}

// Attach makes the daemon's side of attachment a (whose Interface is set): the interface
// (replacing one of the same name left by a pod attach that died half-way), the host route
// and the static neighbour. On failure nothing of it is left.
func Attach(d *ctl.Client, a *cluster.PodAttachment) (err error) {
	i := a.Interface
	if old, e := d.Interface(i.Name); e == nil && old.Pod != nil && *old.Pod == a.ContainerID {
		_ = d.DeleteInterface(i.Name)
	}
	var create ctl.Request[ctl.Created]
	switch i.Kind {
	case "tap":
		create = ctl.CreateTap{
			Name: i.Name, HostIfName: a.IfName, Netns: i.Netns, Network: a.Network,
			Pod: a.ContainerID, Queues: i.Queues, MTU: i.MTU, HostMAC: i.HostMAC, MAC: i.MAC,
			AllowedSources: a.AllowedSources(),
		}
	case "memif":
		create = ctl.CreateMemif{
			ID: 0, Socket: i.Socket, Role: ctl.Master, Name: i.Name, Netns: i.Netns, Network: a.Network,
			Pod: a.ContainerID, RingSize: i.RingSize, BufferSize: i.BufferSize, RegionLimitMiB: i.RegionLimitMiB,
			RxQueues: i.Queues, TxQueues: i.Queues, MTU: i.MTU, MAC: i.MAC, Mode: i.Mode, RxMode: i.RxMode,
			AllowedSources: a.AllowedSources(),
		}
	default:
		return fmt.Errorf("interface kind %q", i.Kind)
	}
	_, err = d.Create(create)
	if err != nil {
		return fmt.Errorf("creating the pod's interface: %w", err)
	}
	defer func() {
		if err != nil {
			_ = d.DeleteInterface(i.Name)
		}
	}()
	if err := d.HostRoute(true, a.Address, i.Name, a.Network); err != nil {
		return fmt.Errorf("routing %s to the pod: %w", a.Address, err)
	}
	if err := d.Neighbor(true, i.Name, a.Address, i.HostMAC); err != nil {
		return fmt.Errorf("the pod's neighbour entry: %w", err)
	}
	return nil
}

// Configure makes the pod's side in target, the pod's namespace as OpenNetns checked it:
// for a tap, the device the daemon made; for memif, a stand-in device (see AddStandIn) that
// carries the address and routes for the kernel's view.
func Configure(a *cluster.PodAttachment, target ns.NetNS) error {
	i := a.Interface
	gwMAC, err := net.ParseMAC(i.MAC)
	if err != nil {
		return fmt.Errorf("gateway MAC %q: %w", i.MAC, err)
	}
	return target.Do(func(ns.NetNS) error {
		if i.Kind == "memif" {
			if err := AddStandIn(a.IfName, int(i.MTU)); err != nil {
				return err
			}
		}
		link, err := netlink.LinkByName(a.IfName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return err
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(a.Address.AsSlice()), Mask: net.CIDRMask(32, 32)}}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("address %s: %w", a.Address, err)
		}
		idx := link.Attrs().Index
		if i.Kind == "memif" {
			// The kernel sends nothing through the stand-in; its routes only say where the
			// network is.
			for _, r := range i.Routes {
				dst := ipNet(r)
				if err := netlink.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: &dst, Scope: netlink.SCOPE_LINK}); err != nil {
					return fmt.Errorf("route %s: %w", r, err)
				}
			}
			return nil
		}
		gw := net.IP(i.Gateway.AsSlice())
		gwNet := ipNet(netip.PrefixFrom(i.Gateway, 32))
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: &gwNet, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route to the gateway %s: %w", i.Gateway, err)
		}
		for _, r := range i.Routes {
			dst := ipNet(r)
			// On-link: a pod on several networks has a gateway of the same address on each
			// interface, and the host route to it can name only one of them.
			route := &netlink.Route{LinkIndex: idx, Dst: &dst, Gw: gw, Flags: int(netlink.FLAG_ONLINK)}
			if err := netlink.RouteReplace(route); err != nil {
				return fmt.Errorf("route %s via %s: %w", r, i.Gateway, err)
			}
		}
		return netlink.NeighSet(&netlink.Neigh{
			LinkIndex: idx, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: gw, HardwareAddr: gwMAC,
		})
	})
}

func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

// AddStandIn makes a memif pod's stand-in interface in the current namespace: a dummy
// device, or where the kernel has no dummy driver a persistent TUN device nobody reads,
// which carries addresses and routes just as well.
func AddStandIn(ifName string, mtu int) error {
	attrs := netlink.LinkAttrs{Name: ifName, MTU: mtu}
	err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
	if errors.Is(err, syscall.EOPNOTSUPP) {
		err = netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: attrs, Mode: netlink.TUNTAP_MODE_TUN, Flags: netlink.TUNTAP_DEFAULTS | netlink.TUNTAP_NO_PI})
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("stand-in device %s: %w", ifName, err)
	}
	return nil
}

// DeleteStandIn removes a memif pod's stand-in device; a namespace or device that is gone is
// nothing to delete.
func DeleteStandIn(netns, ifName string) error {
	err := ns.WithNetNSPath(netns, func(ns.NetNS) error {
		l, err := netlink.LinkByName(ifName)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return nil
			}
			return err
		}
		if t := l.Type(); t != "dummy" && t != "tuntap" {
			return nil
		}
		return netlink.LinkDel(l)
	})
	var gone ns.NSPathNotExistErr
	if errors.As(err, &gone) {
		return nil
	}
	return err
}
