// Package cli is the node agent's command line, veclane-agent: it registers its node (name,
// VTEP) in etcd under a lease and keeps the node's veclane daemon in step with the cluster
// (package agent): every network, and a route through the VXLAN tunnel to the right node for
// every pod of a network on another node.
//
//	veclane-agent --etcd http://127.0.0.1:2379 --node n1 --vtep 192.0.2.1 \
//	    --uplink uplink|none [--physical-network storage=uplink2] [--ctl-socket /run/veclane/ctl.sock]
//	    [--etcd-ca CA --etcd-cert CERT --etcd-key KEY]
//
// `veclane-agent network add NAME --vni N --range CIDR [--physical-network P]`, `network del
// NAME` and `network list` write and read the cluster's networks in etcd (--etcd and the TLS
// flags, as the agent's).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"veclane.dev/cni/agent"
	"veclane.dev/cni/cluster"
	"veclane.dev/cni/etcdclient"
	"veclane.dev/cni/ipam"
)

type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pairs) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" || val == "" {
		return fmt.Errorf("expected NAME=INTERFACE, got %q", v)
	}
	p[k] = val
	return nil
}

// Main runs veclane-agent with args (without the program's name) until it is stopped
// (SIGINT, SIGTERM); its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "network" {
		if err := networkCmd(args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, "veclane-agent:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("veclane-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		f       agentFlags
		logJSON = fs.Bool("log-json", false, "log one JSON object per line")
	)
	fs.StringVar(&f.node, "node", "", "this node's name (default: the host name)")
	fs.StringVar(&f.vtep, "vtep", "", "this node's VTEP address (its uplink's address)")
	fs.StringVar(&f.uplink, "uplink", "", "the default uplink interface (networks without a physical network); none: this node has none, and its networks reach no other node")
	fs.StringVar(&f.ctl, "ctl-socket", "/run/veclane/ctl.sock", "the daemon's control socket")
	fs.StringVar(&f.nodeLink, "node-link", "", "link the node into this network: a tap "+agent.NodeLinkIfName+" (link-local both sides), the network's range routed through it, the node's address (--vtep) routed to it")
	fs.DurationVar(&f.ttl, "lease-ttl", 10*time.Second, "how long the node outlives its agent")
	fs.DurationVar(&f.grace, "node-grace", 5*time.Minute, "how long this node keeps routing to the pods of a node whose lease expired (that node's daemon may still forward them)")
	fs.DurationVar(&f.resync, "resync", 30*time.Second, "reconcile at least this often")
	kf := &f.kube
	fs.StringVar(&kf.kubeconfig, "kubeconfig", "", "take services and policies from the Kubernetes API this kubeconfig names")
	fs.BoolVar(&kf.inCluster, "kubernetes-in-cluster", false, "take services and policies from the Kubernetes API the agent's pod is given")
	fs.StringVar(&kf.defaultNet, "default-network", "", "with Kubernetes: the veclane network of pods' eth0 (Services and NetworkPolicies without a network of their own)")
	var etcd etcdclient.Settings
	etcd.AddFlags(fs)
	f.phys = pairs{}
	fs.Var(f.phys, "physical-network", "NAME=INTERFACE: the uplink of a physical network (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if *logJSON {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, etcd, f); err != nil {
		log.Error("veclane-agent", "error", err)
		return 1
	}
	return 0
}

// agentFlags are the agent's command line, but for etcd's and the log's.
type agentFlags struct {
	node, vtep, uplink, ctl, nodeLink string
	ttl, resync, grace                time.Duration
	phys                              pairs
	kube                              kubeFlags
}

// run is the agent until ctx ends (nil then).
func run(ctx context.Context, log *slog.Logger, etcd etcdclient.Settings, f agentFlags) error {
	node := f.node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node not given and no host name: %w", err)
		}
		node = h
	}
	addr, err := netip.ParseAddr(f.vtep)
	if err != nil || !addr.Is4() {
		return fmt.Errorf("--vtep %q: not an IPv4 address", f.vtep)
	}
	uplinks := agent.Uplinks{}
	switch f.uplink {
	case "":
	case "none":
		// A node without one (a one-node cluster): networks stay on this node.
		uplinks[""] = ""
	default:
		uplinks[""] = f.uplink
	}
	for k, v := range f.phys {
		uplinks[k] = v
	}
	if len(uplinks) == 0 {
		return fmt.Errorf("no uplink: give --uplink or --physical-network")
	}
	c, err := etcd.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	kube, err := f.kube.watch(ctx, log)
	if err != nil {
		return err
	}
	err = agent.Run(ctx, cluster.NewStore(c), agent.Config{
		Node:           cluster.Node{Name: node, VTEP: addr},
		Uplinks:        uplinks,
		CtlSocket:      f.ctl,
		LeaseTTL:       f.ttl,
		Resync:         f.resync,
		Log:            log,
		Kube:           kube,
		DefaultNetwork: f.kube.defaultNet,
		NodeLink:       f.nodeLink,
		NodeGrace:      f.grace,
		IPAM:           ipam.New(c, node),
	})
	if ctx.Err() != nil {
		log.Info("stopped", "node", node)
		return nil
	}
	return err
}

// kubeFlags say whether and how the agent reads the Kubernetes API.
type kubeFlags struct {
	kubeconfig string
	inCluster  bool
	defaultNet string
}

// watch starts watching the API the flags name; nil without Kubernetes.
func (k kubeFlags) watch(ctx context.Context, log *slog.Logger) (agent.KubeSource, error) {
	if k.kubeconfig == "" && !k.inCluster {
		return nil, nil
	}
	if k.kubeconfig != "" && k.inCluster {
		return nil, fmt.Errorf("--kubeconfig and --kubernetes-in-cluster: give one")
	}
	if k.defaultNet == "" {
		return nil, fmt.Errorf("with Kubernetes, --default-network names the network of pods' eth0")
	}
	var cfg *rest.Config
	var err error
	if k.inCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	log.Info("watching the Kubernetes API", "host", cfg.Host, "default_network", k.defaultNet)
	w, err := agent.WatchKube(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	return w, nil
}
