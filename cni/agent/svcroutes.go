package agent

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/pod"
)

// A pod reaches the Services of its default network through eth0, whose default route is
// veclane's. A Service of a secondary network has a cluster IP from the same range, which
// eth0 would take too, into a network where that service is not. So the agent routes, in
// each local pod's namespace, the cluster IP of every Service of each secondary network the
// pod is on through its interface on that network (a /32, on-link through its gateway, as
// the multus-service convention has a proxy do in the pod). The routes carry their own
// protocol number, svcRouteProto: the agent adds and deletes those only.
const svcRouteProto netlink.RouteProtocol = 0x76 // 'v'

// svcRouteRecheck is how long a pod's routes, once made, are trusted without looking.
const svcRouteRecheck = 30 * time.Second

type routeMemo struct {
	vips string
	at   time.Time
}

// RoutePods makes the service routes of every local tap attachment of a secondary network
// (anything but defaultNet) what want's services of that network ask for; it returns what
// it changed and what it could not do. A pod made again this round (its interface, with its
// routes, went with a restarted daemon) is looked at again at once: restored lists them.
func (a *StatefulApplier) RoutePods(want Stateful, atts []cluster.PodAttachment, self, defaultNet string, restored map[string]bool) (applied, problems []string) {
	vips := map[string][]netip.Addr{}
	for _, s := range want.Services {
		if s.Network != defaultNet {
			vips[s.Network] = append(vips[s.Network], s.VIP)
		}
	}
	// Each network's cluster IPs, sorted and once each, and their fingerprint.
	fps := map[string]string{}
	for n, v := range vips {
		vips[n] = uniqueAddrs(v)
		fps[n] = fmt.Sprint(vips[n])
	}
	if a.routed == nil {
		a.routed = map[string]routeMemo{}
	}
	seen := map[string]bool{}
	for i := range atts {
		at := &atts[i]
		if at.Node != self || at.Network == defaultNet || at.Interface == nil || at.Interface.Kind != "tap" {
			continue
		}
		key := at.ContainerID + "/" + at.IfName
		seen[key] = true
		// A network without services has none: no routes, fingerprint "".
		want, fp := vips[at.Network], fps[at.Network]
		if m, ok := a.routed[key]; ok && m.vips == fp && time.Since(m.at) < svcRouteRecheck && !restored[key] {
			continue
		}
		changed, err := routePod(at, want)
		if err != nil {
			problems = append(problems, fmt.Sprintf("pod %s interface %s: service routes: %v", at.ContainerID, at.IfName, err))
			delete(a.routed, key)
			continue
		}
		a.routed[key] = routeMemo{vips: fp, at: time.Now()}
		if changed != "" {
			applied = append(applied, fmt.Sprintf("pod %s interface %s: service routes %s", at.ContainerID, at.IfName, changed))
		}
	}
	for k := range a.routed {
		if !seen[k] {
			delete(a.routed, k)
		}
	}
	return applied, problems
}

func uniqueAddrs(in []netip.Addr) []netip.Addr {
	sort.Slice(in, func(i, j int) bool { return in[i].Less(in[j]) })
	out := in[:0:0]
	for i, x := range in {
		if i == 0 || x != in[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// routePod makes the service routes on attachment a's interface, in its namespace (opened
// through pod.OpenNetns: a pod's, never the host's), exactly vips; what it changed.
func routePod(a *cluster.PodAttachment, vips []netip.Addr) (string, error) {
	target, err := pod.OpenNetns(a.Interface.Netns)
	if err != nil {
		return "", err
	}
	defer func() { _ = target.Close() }()
	var added, deleted []string
	err = target.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(a.IfName)
		if err != nil {
			return err
		}
		have, err := netlink.RouteListFiltered(netlink.FAMILY_V4,
			&netlink.Route{LinkIndex: link.Attrs().Index, Protocol: svcRouteProto},
			netlink.RT_FILTER_OIF|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return err
		}
		wanted := map[netip.Addr]bool{}
		for _, v := range vips {
			wanted[v] = true
		}
		for _, r := range have {
			addr, ok := netip.AddrFromSlice(r.Dst.IP.To4())
			if ones, _ := r.Dst.Mask.Size(); ok && ones == 32 && wanted[addr] {
				delete(wanted, addr)
				continue
			}
			if err := netlink.RouteDel(&r); err != nil {
				return fmt.Errorf("deleting %s: %w", r.Dst, err)
			}
			deleted = append(deleted, r.Dst.String())
		}
		gw := net.IP(a.Interface.Gateway.AsSlice())
		for _, v := range vips {
			if !wanted[v] {
				continue
			}
			dst := net.IPNet{IP: net.IP(v.AsSlice()), Mask: net.CIDRMask(32, 32)}
			r := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: &dst, Gw: gw, Flags: int(netlink.FLAG_ONLINK), Protocol: svcRouteProto}
			if err := netlink.RouteReplace(r); err != nil {
				return fmt.Errorf("adding %s: %w", v, err)
			}
			added = append(added, v.String())
		}
		return nil
	})
	var out []string
	if len(added) > 0 {
		out = append(out, "added "+strings.Join(added, " "))
	}
	if len(deleted) > 0 {
		out = append(out, "deleted "+strings.Join(deleted, " "))
	}
	return strings.Join(out, "; "), err
}
