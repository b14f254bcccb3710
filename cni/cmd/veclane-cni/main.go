// Command veclane-cni is the CNI plugin (spec 1.1: ADD, DEL, CHECK, GC, STATUS, VERSION)
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
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"
	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/pod"
)

// timeout bounds every call to etcd: a plugin the runtime waits for must not hang.
const timeout = 10 * time.Second

// defaultGateway is the pod's next hop for the network: a link-local address no pod has,
// answered by nothing (the pod holds a permanent neighbour entry for it).
const defaultGateway = "169.254.1.1"

type ifaceConf struct {
	// Kind is "tap" (default) or "memif".
	Kind   string `json:"kind"`
	Queues uint16 `json:"queues,omitempty"`
	MTU    uint16 `json:"mtu,omitempty"`
	// memif: the socket in the pod's namespace (default "@veclane-<ifname>", abstract),
	// its rings, and the mode the pod speaks ("ethernet", the default, or "ip": bare IPv4).
	Socket     string `json:"socket,omitempty"`
	RingSize   uint32 `json:"ring_size,omitempty"`
	BufferSize uint32 `json:"buffer_size,omitempty"`
	Mode       string `json:"mode,omitempty"`
	// RxMode "polling" keeps the daemon's workers polling its queues; "interrupt" or
	// "adaptive" (or nothing) leave them to the daemon's own mode.
	RxMode string `json:"rx_mode,omitempty"`
}

type netConf struct {
	types.PluginConf
	NetworkName   string    `json:"network_name"`
	Interface     ifaceConf `json:"interface"`
	CtlSocket     string    `json:"ctl_socket"`
	EtcdEndpoints []string  `json:"etcd_endpoints"`
	Gateway       string    `json:"gateway"`
}

func configError(msg string) error {
	return types.NewError(types.ErrInvalidNetworkConfig, msg, "")
}

// load reads and checks the configuration, filling in the defaults.
func load(stdin []byte) (*netConf, error) {
	var c netConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "the network configuration is not JSON", err.Error())
	}
	if c.NetworkName == "" {
		c.NetworkName = c.Name
	}
	if c.NetworkName == "" {
		return nil, configError("neither network_name nor the network's name is set")
	}
	if c.IPAM.Type == "" {
		return nil, configError("ipam.type is missing: name the IPAM plugin (veclane-ipam)")
	}
	if len(c.EtcdEndpoints) == 0 {
		return nil, configError("etcd_endpoints is missing (the attachments are recorded there)")
	}
	if c.CtlSocket == "" {
		c.CtlSocket = "/run/veclane/ctl.sock"
	}
	if c.Gateway == "" {
		c.Gateway = defaultGateway
	}
	if _, err := netip.ParseAddr(c.Gateway); err != nil {
		return nil, configError("gateway " + c.Gateway + " is no IPv4 address")
	}
	switch c.Interface.Kind {
	case "":
		c.Interface.Kind = "tap"
	case "tap", "memif":
	default:
		return nil, configError(fmt.Sprintf("interface.kind %q: expected tap or memif", c.Interface.Kind))
	}
	if c.Interface.Mode != "" && c.Interface.Mode != "ethernet" && c.Interface.Mode != "ip" {
		return nil, configError(fmt.Sprintf("interface.mode %q: expected ethernet or ip", c.Interface.Mode))
	}
	switch c.Interface.RxMode {
	case "", "polling", "interrupt", "adaptive":
	default:
		return nil, configError(fmt.Sprintf("interface.rx_mode %q: expected polling, interrupt or adaptive", c.Interface.RxMode))
	}
	if c.Interface.Kind == "tap" && (c.Interface.Socket != "" || c.Interface.RingSize != 0 || c.Interface.BufferSize != 0 || c.Interface.Mode != "" || c.Interface.RxMode != "") {
		return nil, configError("interface.socket, ring_size, buffer_size, mode and rx_mode are memif settings; kind is tap")
	}
	return &c, nil
}

func node() string {
	if n := os.Getenv("VECLANE_NODE"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

func memifSocket(c *netConf, ifName string) string {
	if c.Interface.Socket != "" {
		return c.Interface.Socket
	}
	return "@veclane-" + ifName
}

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
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.EtcdEndpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, "etcd client: "+err.Error(), "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return &session{st: cluster.NewStore(cl), ctx: ctx, done: func() { cancel(); _ = cl.Close() }}, nil
}

// snapshot reads the whole cluster.
func (e *session) snapshot() (*cluster.Snapshot, error) {
	snap, err := e.st.Snapshot(e.ctx)
	if err != nil {
		return nil, types.NewError(types.ErrTryAgainLater, "reading the cluster from etcd: "+err.Error(), "")
	}
	return snap, nil
}

// undo runs the steps of a failed ADD backwards.
type undo []func()

func (u *undo) push(f func()) { *u = append(*u, f) }

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

func cmdAdd(args *skel.CmdArgs) (err error) {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	if args.Netns == "" {
		return configError("CNI_NETNS is empty: a pod interface needs the pod's namespace")
	}
	// What a failed ADD undoes, then the connections it used (closed after the undo, which
	// needs them).
	var u undo
	var closers []func()
	defer func() {
		if err != nil {
			u.run()
		}
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	// The address first: nothing else is worth doing without one.
	r, err := ipam.ExecAdd(c.IPAM.Type, args.StdinData)
	if err != nil {
		return err
	}
	u.push(func() { _ = ipam.ExecDel(c.IPAM.Type, args.StdinData) })
	res, err := types100.NewResultFromResult(r)
	if err != nil {
		return err
	}
	var ipc *types100.IPConfig
	for _, ip := range res.IPs {
		if ip.Address.IP.To4() != nil {
			ipc = ip
			break
		}
	}
	if ipc == nil {
		return types.NewError(types.ErrInternal, "the IPAM plugin gave no IPv4 address", "")
	}
	addr, _ := netip.AddrFromSlice(ipc.Address.IP.To4())
	ones, _ := ipc.Address.Mask.Size()
	subnet := netip.PrefixFrom(addr, ones).Masked()
	gw := netip.MustParseAddr(c.Gateway)

	d, err := daemon(c)
	if err != nil {
		return err
	}
	closers = append(closers, func() { _ = d.Close() })
	hostMAC, ourMAC := pod.MACs(args.ContainerID, args.IfName)
	routes := append([]*types.Route{{Dst: prefixNet(subnet)}}, res.Routes...)
	att := cluster.PodAttachment{
		Network: c.NetworkName, ContainerID: args.ContainerID, IfName: args.IfName, Node: node(), Address: addr,
		Interface: &cluster.PodInterface{
			Kind: c.Interface.Kind, Netns: args.Netns, Name: pod.DaemonName(args.ContainerID, args.IfName),
			MAC: ourMAC.String(), HostMAC: hostMAC.String(), MTU: c.Interface.MTU, Queues: c.Interface.Queues,
			Gateway: gw,
		},
	}
	pi := att.Interface
	if pi.Kind == "memif" {
		pi.Socket, pi.RingSize, pi.BufferSize = memifSocket(c, args.IfName), c.Interface.RingSize, c.Interface.BufferSize
		if c.Interface.Mode == "ip" {
			pi.Mode = "ip"
		}
		pi.RxMode = c.Interface.RxMode
	}
	for _, r := range routes {
		p, ok := netip.AddrFromSlice(r.Dst.IP.To4())
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		pi.Routes = append(pi.Routes, netip.PrefixFrom(p, ones))
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
	if err := pod.Configure(&att); err != nil {
		return types.NewError(types.ErrInternal, "configuring "+args.IfName+" in "+args.Netns+": "+err.Error(), "")
	}

	e, err := etcd(c)
	if err != nil {
		return err
	}
	closers = append(closers, e.done)
	// Undone even when the put fails: a put that timed out may have committed.
	u.push(func() { _ = e.st.DeleteAttachment(e.ctx, att.Network, att.ContainerID, att.IfName) })
	if err := e.st.PutAttachment(e.ctx, att); err != nil {
		return types.NewError(types.ErrTryAgainLater, "recording the attachment in etcd: "+err.Error(), "")
	}

	var socketPath string
	if pi.Kind == "memif" {
		socketPath = pi.Socket
	}
	name := pi.Name
	mtu := int(info.MTU)
	result := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: name, Mac: ourMAC.String(), Mtu: mtu},
			{Name: args.IfName, Mac: hostMAC.String(), Mtu: mtu, Sandbox: args.Netns, SocketPath: socketPath},
		},
		IPs: []*types100.IPConfig{{
			Interface: types100.Int(1),
			Address:   net.IPNet{IP: net.IP(addr.AsSlice()), Mask: net.CIDRMask(32, 32)},
			Gateway:   net.IP(gw.AsSlice()),
		}},
		Routes: routes,
		DNS:    res.DNS,
	}
	if c.DNS.Nameservers != nil {
		result.DNS = c.DNS
	}
	return types.PrintResult(result, c.CNIVersion)
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

func cmdDel(args *skel.CmdArgs) error {
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

func cmdCheck(args *skel.CmdArgs) error {
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
	e, err := etcd(c)
	if err != nil {
		return err
	}
	defer e.done()
	snap, err := e.snapshot()
	if err != nil {
		return err
	}
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

func cmdGC(args *skel.CmdArgs) error {
	c, err := load(args.StdinData)
	if err != nil {
		return err
	}
	valid := map[string]bool{}
	for _, a := range c.ValidAttachments {
		valid[a.ContainerID+"/"+a.IfName] = true
	}
	e, err := etcd(c)
	if err != nil {
		return err
	}
	defer e.done()
	snap, err := e.snapshot()
	if err != nil {
		return err
	}
	self := node()
	for _, a := range snap.Attachments {
		if a.Network == c.NetworkName && a.Node == self && !valid[a.ContainerID+"/"+a.IfName] {
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

func cmdStatus(args *skel.CmdArgs) error {
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

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    cmdAdd,
		Del:    cmdDel,
		Check:  cmdCheck,
		GC:     cmdGC,
		Status: cmdStatus,
	}, version.All, "veclane-cni: pod interfaces (tap, memif) on veclane networks")
}

// invokeGC passes GC on to the IPAM plugin, with the valid attachments it was given.
func invokeGC(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateGC(ctx, plugin, stdin, nil)
}
