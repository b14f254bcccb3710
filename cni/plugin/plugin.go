// Package plugin is the CNI plugin veclane-cni (spec 1.1: ADD, DEL, CHECK, GC, STATUS, VERSION)
// that gives a pod an interface on a veclane network: it delegates the address to the IPAM
// plugin named in the configuration (veclane-ipam), asks the node's daemon for the pod's
// interface (a tap device inside the pod's namespace, or a memif master listening there),
// routes the pod's address to it in the network's VRF, configures the pod's side, and records
// the attachment in etcd so that the node agents route to it from every other node. A failed
// ADD undoes what it did; DEL succeeds when the daemon or the pod is already gone.
//
// The configuration is a NetworkAttachmentDefinition's (see docs/cluster.md):
//
//	{"cniVersion": "1.1.0", "name": "blue", "type": "veclane-cni",
//	 "network_name": "blue", "interface": {"kind": "tap", "queues": 1, "mtu": 1500},
//	 "ctl_socket": "/run/veclane/ctl.sock", "etcd_endpoints": ["http://10.0.0.1:2379"],
//	 "ipam": {"type": "veclane-ipam", "range": "10.1.0.0/16", "etcd_endpoints": [...]}}
package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	vipam "veclane.dev/cni/ipam"
	"veclane.dev/cni/pod"
)

// Versions are the CNI spec versions the plugin speaks: VERSION's answer, and what the
// tests run ADD, CHECK and DEL at.
var Versions = version.All

// Funcs are the plugin's commands, for skel.PluginMainFuncs.
var Funcs = skel.CNIFuncs{Add: Add, Del: Del, Check: Check, GC: GC, Status: Status}

// About is the plugin's line for VERSION and a runtime's logs.
const About = "veclane-cni: pod interfaces (tap, memif) on veclane networks"

// daemon connects to the node's daemon; "try again later" when it is not there.
func daemon(c *netConf) (*ctl.Client, error) {
	d, err := ctl.Dial(c.CtlSocket)
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, err.Error(), "is the veclane daemon running?")
	}
	return d, nil
}

// session is a connection to etcd with the deadline every call of one command shares; done
// releases both.
type session struct {
	st   *cluster.Store
	ctx  context.Context
	done func()
}

func etcd(c *netConf) (*session, error) {
	cl, err := c.CNIClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return &session{st: cluster.NewStore(cl), ctx: ctx, done: func() { cancel(); _ = cl.Close() }}, nil
}

// etcdSnapshot connects to etcd and reads the whole cluster; the caller ends the session.
func etcdSnapshot(c *netConf) (*session, *cluster.Snapshot, error) {
	e, err := etcd(c)
	if err != nil {
		return nil, nil, err
	}
	snap, err := e.st.Snapshot(e.ctx)
	if err != nil {
		e.done()
		return nil, nil, types.NewError(types.ErrTryAgainLater, "reading the cluster from etcd: "+err.Error(), "")
	}
	return e, snap, nil
}

// undo runs the steps of a failed ADD backwards.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// Add is ADD: the pod's address from the IPAM plugin, its interface in the daemon and in
// its namespace, its attachment in etcd; on failure what was done is undone, in reverse.
func Add(args *skel.CmdArgs) (err error) {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	if args.Netns == "" {
		return configError("CNI_NETNS is empty: a pod interface needs the pod's namespace")
	}
	// The rule the node agent applies before it makes the interface again (pod.OpenNetns):
	// what it would refuse is never made.
	target, err := pod.OpenNetns(args.Netns)
	if err != nil {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS: "+err.Error(), "")
	}
	// What a failed ADD undoes, then the connections it used (closed after the undo, which
	// needs them).
	var u undo
	closers := []func(){func() { _ = target.Close() }}
	defer func() {
		if err != nil {
			u.run()
		}
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	e, err := etcd(c)
	if err != nil {
		return err
	}
	closers = append(closers, e.done)
	// The address first: nothing else is worth doing without one.
	r, err := ipam.ExecAdd(c.IPAM.Type, args.StdinData)
	if err != nil {
		return err
	}
	u.push(func() { _ = ipam.ExecDel(c.IPAM.Type, args.StdinData) })
	res, addr, subnet, err := ipv4Address(r)
	if err != nil {
		return err
	}
	gw := netip.MustParseAddr(c.Gateway)

	d, err := daemon(c)
	if err != nil {
		return err
	}
	closers = append(closers, func() { _ = d.Close() })
	routes := append([]*types.Route{{Dst: prefixNet(subnet)}}, res.Routes...)
	att := attachment(c, args, addr, gw, routes)
	pi := att.Interface
	if err := inClusterNetwork(e, &att); err != nil {
		return err
	}
	if err := pod.Attach(d, &att); err != nil {
		return daemonError("attaching the pod", err)
	}
	u.push(func() { _ = d.DeleteInterface(pi.Name) })
	info, err := d.Interface(pi.Name)
	if err != nil {
		return daemonError("reading the pod's interface", err)
	}
	if pi.Kind == "memif" {
		// Before Configure, which may fail after making the stand-in.
		u.push(func() { _ = pod.DeleteStandIn(args.Netns, args.IfName) })
	}
	if err := pod.Configure(&att, target); err != nil {
		return types.NewError(types.ErrInternal, "configuring "+args.IfName+" in "+args.Netns+": "+err.Error(), "")
	}

	// Undone even when the put fails: a put that timed out may have committed.
	u.push(func() { _ = e.st.DeleteAttachment(e.ctx, att.Network, att.ContainerID, att.IfName) })
	if err := e.st.PutAttachment(e.ctx, att); err != nil {
		return types.NewError(types.ErrTryAgainLater, "recording the attachment in etcd: "+err.Error(), "")
	}

	dns := res.DNS
	if c.DNS.Nameservers != nil {
		dns = c.DNS
	}
	return types.PrintResult(addResult(&att, int(info.MTU), routes, dns), c.CNIVersion)
}

// inClusterNetwork refuses an attachment that lies outside the cluster's record of its
// network (cluster.PodAttachment.InNetwork: address, routes, gateway), which the node agent
// would refuse to restore. A network the cluster does not record (the daemon's own) is not
// checked here, and the agent does not restore its pods.
func inClusterNetwork(e *session, att *cluster.PodAttachment) error {
	n, ok, err := e.st.Network(e.ctx, att.Network)
	if err != nil {
		return types.NewError(types.ErrTryAgainLater, "reading network "+att.Network+" from etcd: "+err.Error(), "")
	}
	if !ok {
		return nil
	}
	if err := att.InNetwork(&n); err != nil {
		return configError(err.Error() + " (set ipam's range and routes, and gateway, inside the network)")
	}
	return nil
}

// ipv4Address is the IPAM plugin's result as the current version's, its first IPv4 address
// and that address's subnet.
func ipv4Address(r types.Result) (*types100.Result, netip.Addr, netip.Prefix, error) {
	res, err := types100.NewResultFromResult(r)
	if err != nil {
		return nil, netip.Addr{}, netip.Prefix{}, err
	}
	for _, ip := range res.IPs {
		if addr, ok := netip.AddrFromSlice(ip.Address.IP.To4()); ok {
			ones, _ := ip.Address.Mask.Size()
			return res, addr, netip.PrefixFrom(addr, ones).Masked(), nil
		}
	}
	return nil, netip.Addr{}, netip.Prefix{}, types.NewError(types.ErrInternal, "the IPAM plugin gave no IPv4 address", "")
}

// attachment is what ADD makes and records: the pod's interface as the configuration asks
// for it, with the pod's address, gateway and (IPv4) routes.
func attachment(c *netConf, args *skel.CmdArgs, addr, gw netip.Addr, routes []*types.Route) cluster.PodAttachment {
	hostMAC, ourMAC := pod.MACs(args.ContainerID, args.IfName)
	pi := &cluster.PodInterface{
		Kind: c.Interface.Kind, Netns: args.Netns, Name: pod.DaemonName(args.ContainerID, args.IfName),
		MAC: ourMAC.String(), HostMAC: hostMAC.String(), MTU: c.Interface.MTU, Queues: c.Interface.Queues,
		Gateway: gw,
	}
	if pi.Kind == "memif" {
		pi.Socket, pi.RingSize, pi.BufferSize = memifSocket(c, args.IfName), c.Interface.RingSize, c.Interface.BufferSize
		if c.Interface.Mode == "ip" {
			pi.Mode = "ip"
		}
		pi.RxMode = c.Interface.RxMode
		pi.RegionLimitMiB = c.Interface.RegionLimitMiB
	}
	for _, f := range c.Interface.Forwards {
		pi.Forwards = append(pi.Forwards, netip.MustParsePrefix(f).Masked())
	}
	pi.AnySource = c.Interface.SourceCheck != nil && !*c.Interface.SourceCheck
	for _, r := range routes {
		p, ok := netip.AddrFromSlice(r.Dst.IP.To4())
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		pi.Routes = append(pi.Routes, netip.PrefixFrom(p, ones))
	}
	return cluster.PodAttachment{
		Network: c.NetworkName, ContainerID: args.ContainerID, IfName: args.IfName, Node: cluster.LocalNode(),
		Address: addr, Interface: pi, Pod: podRef(args.Args),
	}
}

// podRef reads the pod's namespace, name and UID from CNI_ARGS ("K=V;K=V", as Kubernetes
// runtimes pass them); nil outside Kubernetes.
func podRef(cniArgs string) *cluster.PodRef {
	var r cluster.PodRef
	for _, kv := range strings.Split(cniArgs, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			r.Namespace = v
		case "K8S_POD_NAME":
			r.Name = v
		case "K8S_POD_UID":
			r.UID = v
		}
	}
	if r.Namespace == "" || r.Name == "" {
		return nil
	}
	return &r
}

// addResult is ADD's result: the daemon's interface and the pod's (with memif's socket),
// the address as a /32 on the pod's with its gateway, the routes and DNS.
func addResult(att *cluster.PodAttachment, mtu int, routes []*types.Route, dns types.DNS) *types100.Result {
	pi := att.Interface
	var socketPath string
	if pi.Kind == "memif" {
		socketPath = pi.Socket
	}
	return &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: pi.Name, Mac: pi.MAC, Mtu: mtu},
			{Name: att.IfName, Mac: pi.HostMAC, Mtu: mtu, Sandbox: pi.Netns, SocketPath: socketPath},
		},
		IPs: []*types100.IPConfig{{
			Interface: types100.Int(1),
			Address:   net.IPNet{IP: net.IP(att.Address.AsSlice()), Mask: net.CIDRMask(32, 32)},
			Gateway:   net.IP(pi.Gateway.AsSlice()),
		}},
		Routes: routes,
		DNS:    dns,
	}
}

func prefixNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}

// daemonError turns a refusal of the daemon into a CNI error a user can act on.
func daemonError(what string, err error) error {
	var refused *ctl.Error
	if errors.As(err, &refused) {
		return types.NewError(types.ErrInternal, what+": "+refused.Message, "")
	}
	return types.NewError(types.ErrTryAgainLater, what+": "+err.Error(), "")
}

// Del is DEL: the attachment, the daemon's interface, memif's stand-in and the address go;
// what is already gone (the daemon, the pod's namespace, the interface) is not an error.
func Del(args *skel.CmdArgs) error {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	e, err := etcd(c)
	if err != nil {
		return err
	}
	defer e.done()
	// The attachment first: the other nodes stop routing to the pod.
	if err := e.st.DeleteAttachment(e.ctx, c.NetworkName, args.ContainerID, args.IfName); err != nil {
		return types.NewError(types.ErrTryAgainLater, "deleting the attachment in etcd: "+err.Error(), "")
	}
	if d, err := ctl.Dial(c.CtlSocket); err == nil {
		err := d.DeleteInterface(pod.DaemonName(args.ContainerID, args.IfName))
		d.Close()
		if err != nil && !ctl.NoInterface(err) {
			return daemonError("deleting the pod's interface", err)
		}
	} else if !ctl.Gone(err) {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	if c.Interface.Kind == "memif" && args.Netns != "" {
		if err := pod.DeleteStandIn(args.Netns, args.IfName); err != nil {
			return types.NewError(types.ErrInternal, "deleting "+args.IfName+" in "+args.Netns+": "+err.Error(), "")
		}
	}
	return ipam.ExecDel(c.IPAM.Type, args.StdinData)
}

// Check is CHECK: the address, the daemon's interface (the pod's, on the network), the
// attachment in etcd, and routes to the pod and to every pod of the network on another node.
func Check(args *skel.CmdArgs) error {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	if err := ipam.ExecCheck(c.IPAM.Type, args.StdinData); err != nil {
		return err
	}
	d, err := daemon(c)
	if err != nil {
		return err
	}
	defer d.Close()
	name := pod.DaemonName(args.ContainerID, args.IfName)
	fail := func(msg string) error { return types.NewError(types.ErrInternal, msg, "") }
	info, err := d.Interface(name)
	if err != nil {
		return fail(fmt.Sprintf("container %s interface %s: the daemon has no interface %s (%v)", args.ContainerID, args.IfName, name, err))
	}
	if info.Pod == nil || *info.Pod != args.ContainerID || info.Network == nil || *info.Network != c.NetworkName {
		return fail(fmt.Sprintf("interface %s belongs to another pod or network", name))
	}
	e, snap, err := etcdSnapshot(c)
	if err != nil {
		return err
	}
	defer e.done()
	var mine *cluster.PodAttachment
	for i := range snap.Attachments {
		a := &snap.Attachments[i]
		if a.Network == c.NetworkName && a.ContainerID == args.ContainerID && a.IfName == args.IfName {
			mine = a
		}
	}
	if mine == nil {
		return fail(fmt.Sprintf("container %s interface %s has no attachment in etcd", args.ContainerID, args.IfName))
	}
	fib, err := d.Fib(info.Table)
	if err != nil {
		return daemonError("reading the network's routes", err)
	}
	routed := map[netip.Prefix]string{}
	for _, e := range fib {
		routed[e.Prefix] = e.Path
	}
	if p, ok := routed[netip.PrefixFrom(mine.Address, 32)]; !ok || !strings.Contains(p, name) {
		return fail(fmt.Sprintf("the daemon does not route %s to %s (%q)", mine.Address, name, p))
	}
	// Every pod of the network on a registered node elsewhere must be routed (through a
	// tunnel to its node): what the agent keeps, and what a hand-deleted tunnel breaks.
	nodes := map[string]bool{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = true
	}
	for _, a := range snap.Attachments {
		if a.Network != c.NetworkName || a.Node == mine.Node || !nodes[a.Node] {
			continue
		}
		if _, ok := routed[netip.PrefixFrom(a.Address, 32)]; !ok {
			return fail(fmt.Sprintf("network %s: no route to %s (container %s on node %s): its tunnel is missing; the node agent restores it", c.NetworkName, a.Address, a.ContainerID, a.Node))
		}
	}
	return nil
}

// GC is GC: this node's attachments and the daemon's pod interfaces of the network that are
// not among the valid attachments go, and the IPAM plugin collects its own.
func GC(args *skel.CmdArgs) error {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	for _, a := range c.ValidAttachments {
		valid[a.ContainerID+"/"+a.IfName] = true
	}
	e, snap, err := etcdSnapshot(c)
	if err != nil {
		return err
	}
	defer e.done()
	self := cluster.LocalNode()
	for _, a := range snap.Attachments {
		reserved := vipam.Reserved(vipam.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
		if a.Network == c.NetworkName && a.Node == self && !valid[a.ContainerID+"/"+a.IfName] && !reserved {
			if err := e.st.DeleteAttachment(e.ctx, a.Network, a.ContainerID, a.IfName); err != nil {
				return types.NewError(types.ErrTryAgainLater, "deleting a stale attachment: "+err.Error(), "")
			}
			fmt.Fprintf(os.Stderr, "veclane-cni: gc deleted the attachment of container %s interface %s\n", a.ContainerID, a.IfName)
		}
	}
	if d, err := ctl.Dial(c.CtlSocket); err == nil {
		defer d.Close()
		ifs, err := d.Interfaces()
		if err != nil {
			return daemonError("listing interfaces", err)
		}
		keep := map[string]bool{}
		for _, a := range c.ValidAttachments {
			keep[pod.DaemonName(a.ContainerID, a.IfName)] = true
		}
		for _, i := range ifs {
			// The plugin's own interfaces only (named as DaemonName names them), of this
			// network, not among the valid attachments'.
			if i.Pod == nil || i.Network == nil || *i.Network != c.NetworkName || !strings.HasPrefix(i.Name, "pod-") || keep[i.Name] {
				continue
			}
			if err := d.DeleteInterface(i.Name); err != nil && !ctl.NoInterface(err) {
				return daemonError("deleting a stale interface", err)
			}
			fmt.Fprintf(os.Stderr, "veclane-cni: gc deleted interface %s of container %s\n", i.Name, *i.Pod)
		}
	} else if !ctl.Gone(err) {
		return types.NewError(types.ErrTryAgainLater, err.Error(), "")
	}
	return ipamGC(c, args.StdinData)
}

func ipamGC(c *netConf, stdin []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return invokeGC(ctx, c.IPAM.Type, stdin)
}

// Status is STATUS: the daemon answers, and the IPAM plugin is ready.
func Status(args *skel.CmdArgs) error {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	d, err := ctl.Dial(c.CtlSocket)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "is the veclane daemon running?")
	}
	d.Close()
	return ipam.ExecStatus(c.IPAM.Type, args.StdinData)
}

// invokeGC passes GC on to the IPAM plugin, with the valid attachments it was given.
func invokeGC(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateGC(ctx, plugin, stdin, nil)
}
