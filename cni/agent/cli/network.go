package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/etcdclient"
)

// networkCmd is `veclane-agent network add|del|list`: the cluster's networks in etcd, written
// through the same checks as every reader applies (a VNI no other network has, a range
// without host bits), so an operator never writes a network the agents would ignore.
func networkCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("network: expected add, del or list")
	}
	fs := flag.NewFlagSet("network "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	var etcd etcdclient.Settings
	etcd.AddFlags(fs)
	vni := fs.Uint("vni", 0, "add: the network's VXLAN network identifier (1 to 16777215, unique)")
	rng := fs.String("range", "", "add: the network's IPv4 range (CIDR)")
	phys := fs.String("physical-network", "", "add: the physical network it is carried on (default: each node's default uplink)")
	var podRoutes prefixes
	fs.Var(&podRoutes, "pod-route", "add: a prefix its pods may route through veclane besides the range (repeatable; 0.0.0.0/0 for the default network)")
	verb := args[0]
	// The name comes first (`add blue --vni 56 ...`), as in `veclane ctl network add`.
	var name string
	rest := args[1:]
	if verb != "list" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return fmt.Errorf("network %s: expected a network name", verb)
		}
		name, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("network %s: unexpected %q", verb, fs.Args())
	}
	c, err := etcd.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := cluster.NewStore(c)
	switch verb {
	case "add":
		p, err := netip.ParsePrefix(*rng)
		if err != nil {
			return fmt.Errorf("network add %s: --range %q: %v", name, *rng, err)
		}
		return st.PutNetwork(ctx, cluster.Network{Name: name, VNI: uint32(*vni), Range: p, PhysicalNetwork: *phys, PodRoutes: podRoutes})
	case "del":
		return st.DeleteNetwork(ctx, name)
	case "list":
		snap, err := st.Snapshot(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-20s %9s  %-18s %-16s %-10s %s\n", "Network", "VNI", "Range", "Physical network", "Origin", "Pod routes")
		for _, n := range snap.Networks {
			fmt.Fprintf(out, "%-20s %9d  %-18s %-16s %-10s %v\n", n.Name, n.VNI, n.Range, n.PhysicalNetwork, n.Origin, n.PodRoutes)
		}
		for _, bad := range snap.Invalid {
			fmt.Fprintf(out, "not applied: %s\n", bad)
		}
		return nil
	}
	return fmt.Errorf("network: unknown %q: expected add, del or list", verb)
}

// prefixes is a repeatable flag of IPv4 CIDRs.
type prefixes []netip.Prefix

func (p *prefixes) String() string { return fmt.Sprint([]netip.Prefix(*p)) }
func (p *prefixes) Set(v string) error {
	x, err := netip.ParsePrefix(v)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}
