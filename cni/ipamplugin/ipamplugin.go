// Package ipamplugin is the CNI IPAM plugin veclane-ipam (CNI spec 1.1: ADD, DEL, CHECK, GC, STATUS,
// VERSION) over the allocator of package ipam: addresses of a network's ranges, allocated in
// etcd so that every node draws from one pool. A main plugin delegates to it with the network's
// configuration, whose `ipam` object holds the ranges (see docs/cluster.md) and
// `etcd_endpoints`; the network is `ipam.network_name`, else the configuration's `name`.
package ipamplugin

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

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/etcdclient"
	"veclane.dev/cni/ipam"
)

// Versions are the CNI spec versions the plugin speaks.
var Versions = version.All

// Funcs are the plugin's commands, for skel.PluginMainFuncs.
var Funcs = skel.CNIFuncs{Add: Add, Del: Del, Check: Check, GC: GC, Status: Status}

// About is the plugin's line for VERSION and a runtime's logs.
const About = "veclane-ipam: IPv4 addresses of veclane networks, allocated in etcd"

// ErrNoFreeAddress is the plugin-specific error code (CNI reserves 0-99) of a full network.
const ErrNoFreeAddress uint = 100

// timeout bounds every call to etcd: a plugin the runtime waits for must not hang.
const timeout = 10 * time.Second

type netConf struct {
	types.PluginConf
	IPAM struct {
		types.IPAM
		NetworkName string `json:"network_name"`
		// etcd_endpoints and the TLS settings, where the allocations are.
		etcdclient.Settings
		Routes []*types.Route `json:"routes,omitempty"`
	} `json:"ipam"`
}

// load reads the network configuration: the IPAM settings, and the raw `ipam` object for
// ipam.ParseConfig (with `network_name` defaulted to the network's name).
func load(stdin []byte) (*netConf, *ipam.Config, error) {
	var c netConf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return nil, nil, types.NewError(types.ErrDecodingFailure, "the network configuration is not JSON", err.Error())
	}
	var raw struct {
		IPAM map[string]json.RawMessage `json:"ipam"`
	}
	if err := json.Unmarshal(stdin, &raw); err != nil || raw.IPAM == nil {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, "the network configuration has no ipam object", "")
	}
	if c.IPAM.NetworkName == "" {
		if c.Name == "" {
			return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, "neither ipam.network_name nor the network's name is set", "")
		}
		b, _ := json.Marshal(c.Name)
		raw.IPAM["network_name"] = b
	}
	if len(c.IPAM.Endpoints) == 0 {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, "ipam.etcd_endpoints is missing", "")
	}
	ipamJSON, _ := json.Marshal(raw.IPAM)
	cfg, err := ipam.ParseConfig(ipamJSON)
	if err != nil {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	return &c, cfg, nil
}

// allocator connects to etcd; the caller closes the client.
func allocator(c *netConf) (*ipam.Allocator, *clientv3.Client, error) {
	cl, err := c.IPAM.CNIClient()
	if err != nil {
		return nil, nil, err
	}
	return ipam.New(cl, cluster.LocalNode()), cl, nil
}

// etcdError turns an allocator's error into a CNI error: a full network is the plugin's own
// code, anything from etcd "try again later".
func etcdError(err error) error {
	if errors.Is(err, ipam.ErrExhausted) {
		return types.NewError(ErrNoFreeAddress, err.Error(), "")
	}
	return types.NewError(types.ErrTryAgainLater, err.Error(), "")
}

func attachment(args *skel.CmdArgs) ipam.Attachment {
	return ipam.Attachment{ContainerID: args.ContainerID, IfName: args.IfName}
}

// session is what every command but STATUS starts with: the configuration, an allocator
// over etcd and a deadline; done closes them.
type session struct {
	conf *netConf
	cfg  *ipam.Config
	al   *ipam.Allocator
	ctx  context.Context
	done func()
}

func open(args *skel.CmdArgs) (*session, error) {
	c, cfg, err := load(args.StdinData)
	if err != nil {
		return nil, err
	}
	al, cl, err := allocator(c)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	return &session{conf: c, cfg: cfg, al: al, ctx: ctx, done: func() { cancel(); _ = cl.Close() }}, nil
}

// inSession runs command f in the session of args, closed after it.
func inSession(args *skel.CmdArgs, f func(*session, *skel.CmdArgs) error) error {
	s, err := open(args)
	if err != nil {
		return err
	}
	defer s.done()
	return f(s, args)
}

// Add is ADD: the attachment's address (the same again for an attachment that has one).
func Add(args *skel.CmdArgs) error { return inSession(args, add) }

func add(s *session, args *skel.CmdArgs) error {
	l, err := s.al.Allocate(s.ctx, s.cfg, attachment(args))
	if err != nil {
		return etcdError(err)
	}
	ip := &types100.IPConfig{Address: ipNet(l.Address)}
	if l.Gateway.IsValid() {
		ip.Gateway = net.IP(l.Gateway.AsSlice())
	}
	r := &types100.Result{CNIVersion: types100.ImplementedSpecVersion, IPs: []*types100.IPConfig{ip}, Routes: s.conf.IPAM.Routes, DNS: s.conf.DNS}
	return types.PrintResult(r, s.conf.CNIVersion)
}

// Del is DEL: the attachment's address is released (none is no error).
func Del(args *skel.CmdArgs) error { return inSession(args, del) }

func del(s *session, args *skel.CmdArgs) error {
	if err := s.al.Release(s.ctx, s.cfg.Network, attachment(args)); err != nil {
		return etcdError(err)
	}
	return nil
}

// Check is CHECK: the attachment has an address, and the previous result lists it.
func Check(args *skel.CmdArgs) error { return inSession(args, check) }

func check(s *session, args *skel.CmdArgs) error {
	l, ok, err := s.al.Lookup(s.ctx, s.cfg, attachment(args))
	if err != nil {
		return etcdError(err)
	}
	if !ok {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("network %s: no address is allocated to container %s interface %s", s.cfg.Network, args.ContainerID, args.IfName), "")
	}
	c := s.conf
	if c.RawPrevResult != nil {
		if err := version.ParsePrevResult(&c.PluginConf); err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		prev, err := types100.NewResultFromResult(c.PrevResult)
		if err != nil {
			return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
		}
		// The address, whatever its prefix length there: a main plugin may configure it as
		// a /32 (veclane-cni does, the pod's link being point to point).
		found := false
		want := net.IP(l.Address.Addr().AsSlice())
		for _, ip := range prev.IPs {
			if ip.Address.IP.Equal(want) {
				found = true
			}
		}
		if !found {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("network %s: container %s interface %s holds %s, which the previous result does not list", s.cfg.Network, args.ContainerID, args.IfName, l.Address), "")
		}
	}
	return nil
}

// GC is GC: the addresses of attachments not among the valid ones are released.
func GC(args *skel.CmdArgs) error { return inSession(args, gc) }

func gc(s *session, args *skel.CmdArgs) error {
	valid := make([]ipam.Attachment, 0, len(s.conf.ValidAttachments))
	for _, a := range s.conf.ValidAttachments {
		valid = append(valid, ipam.Attachment{ContainerID: a.ContainerID, IfName: a.IfName})
	}
	freed, err := s.al.GC(s.ctx, s.cfg.Network, valid)
	for _, f := range freed {
		fmt.Fprintf(os.Stderr, "veclane-ipam: gc released %s of container %s interface %s in network %s\n", f.Address, f.ContainerID, f.IfName, s.cfg.Network)
	}
	if err != nil {
		return etcdError(err)
	}
	return nil
}

// Status is STATUS: etcd answers.
func Status(args *skel.CmdArgs) error {
	c, _, err := load(args.StdinData)
	if err != nil {
		return err
	}
	_, cl, err := allocator(c)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cl.Get(ctx, ipam.Prefix, clientv3.WithCountOnly(), clientv3.WithPrefix()); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "etcd at "+strings.Join(c.IPAM.Endpoints, ",")+" does not answer: "+err.Error(), "")
	}
	return nil
}

func ipNet(p netip.Prefix) net.IPNet {
	return net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
}
